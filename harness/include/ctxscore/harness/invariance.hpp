// Batch invariance (CONTRACT.md §5): one request scored in two batches must
// give the same bits in both. The other batch adds requests, drops them,
// reorders them or inserts ℓ ≤ 0 ones, with S, world, rank, H, QL, sm_scale,
// the cache and the request's own queries and table row unchanged.
#pragma once

#include <cstdint>
#include <string>

#include "ctxscore/case.hpp"
#include "ctxscore/harness/judge.hpp"

namespace ctxscore::harness {

struct Rebatching {
  Case batch;              // the other batch, resolved
  std::int64_t from = 0;   // the request in the first batch
  std::int64_t to = 0;     // where it sits in the other
  std::string how;         // what changed, in words
  std::string str() const;
};

// Scores `c` and `r.batch` (whose request r.to gets the query rows of c's
// request r.from) with `backend`, judges both against the oracle, and then
// compares the request's rows bitwise. The verdict is the first failing
// call's, or the second call's with `invariance` saying where the request's
// rows differ.
Verdict judge_rebatched(Backend& backend, const Case& c, const Rebatching& r, OutMode out);

}  // namespace ctxscore::harness
