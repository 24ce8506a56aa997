// A case materialized and scored by the reference: the starting point of
// every reference-side property.
#pragma once

#include <cstring>
#include <utility>

#include "ctxscore/case.hpp"
#include "ctxscore/score.hpp"

namespace ctxscore::test {

struct ScoredCase {
  HostCase host;
  ShardScores ref;
};

inline ScoredCase score_case(const Case& c) {
  ScoredCase s{materialize(c), {}};
  s.ref = score_shard(s.host.args());
  return s;
}

inline std::uint32_t float_bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

}  // namespace ctxscore::test
