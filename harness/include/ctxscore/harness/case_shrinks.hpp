// Smaller cases than a failing one, by the domain's own steps: fewer
// requests, one head, one query token, world 1, shorter lengths, packed
// layouts. A campaign tries them after the generator's own shrinks, which
// stay inside what the generator drew (a compile-keyed run's batch size,
// say): one more compile is cheap next to a 64-request counterexample.
#pragma once

#include <vector>

#include "ctxscore/case.hpp"

namespace ctxscore::harness {

// Each candidate is resolved and differs from `c` in one step; the larger
// steps come first. A candidate may break the contract (the caller skips it).
std::vector<Case> smaller_cases(const Case& c);

}  // namespace ctxscore::harness
