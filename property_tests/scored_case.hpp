// A case materialized and scored by the reference: the starting point of
// every reference-side property.
#pragma once

#include <utility>

#include "ctxscore/bits.hpp"
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

}  // namespace ctxscore::test
