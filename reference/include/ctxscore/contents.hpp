// A case's query and cache contents as a pure function of its seed and the
// element's index, callable on the host and the device: a benchmark fills a
// large cache on the GPU with exactly the values a host materialization of
// the same case holds.
#pragma once

#include <cstdint>

#include "ctxscore/contract.hpp"

namespace ctxscore {

enum class Stream : std::uint64_t { queries = 1, cache = 2 };

CTXSCORE_HD constexpr std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The bf16 bits of element `index` of `stream`: an exact zero 1 time in 16,
// otherwise a random sign, an exponent in [2^-6, 2^1] and 7 random mantissa
// bits, so no product or 128-term sum overflows or underflows fp32.
CTXSCORE_HD constexpr std::uint16_t content_bits(std::uint64_t seed, Stream stream, std::uint64_t index) {
  const std::uint64_t r = splitmix(splitmix(seed ^ (static_cast<std::uint64_t>(stream) << 56)) + index);
  if ((r & 15u) == 0) return 0;
  const std::uint16_t sign = static_cast<std::uint16_t>(((r >> 8) & 1u) << 15);
  const std::uint16_t exponent = static_cast<std::uint16_t>((127 - 6 + ((r >> 9) % 8u)) << 7);
  const std::uint16_t mantissa = static_cast<std::uint16_t>((r >> 16) & 0x7Fu);
  return static_cast<std::uint16_t>(sign | exponent | mantissa);
}

// The bf16 bits the harness puts where no written score may look (CONTRACT.md
// §4), one kind per case: NaN, +inf, −inf or the largest finite bf16. NaN
// shows a kernel that masks with arithmetic; the others also show one that
// lets a masked value into its max (fmax passes over NaN). content_bits never
// gives any of them.
CTXSCORE_HD constexpr std::uint16_t poison_bits(std::uint64_t seed) {
  const std::uint64_t kind = splitmix(seed ^ 0x706F69736F6Eull) & 3u;
  return kind == 0 ? 0x7FC0 : kind == 1 ? 0x7F80 : kind == 2 ? 0xFF80 : 0x7F7F;
}

}  // namespace ctxscore
