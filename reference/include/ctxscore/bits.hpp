// fp32 values as their bits and back: the one place the project reinterprets
// a float (comparisons of unwritten slots, fixture metadata, packed keys).
#pragma once

#include <cstdint>
#include <cstring>

namespace ctxscore {

inline std::uint32_t float_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

inline float bits_float(std::uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

}  // namespace ctxscore
