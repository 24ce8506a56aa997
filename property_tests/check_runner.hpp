// The harness's checks inside GoogleTest: the backend properties are thin
// callers of them (checks.hpp), with RapidCheck's seed and the case scale.
#pragma once

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::test {

// A harness check's options for a test: `cases` scaled by
// CTXSCORE_CASE_SCALE, the seed RapidCheck's (RC_PARAMS="seed=N" replays a
// run), every failing case judged no further than the first.
harness::CheckOptions check_options(int cases);
// A drawn check's context with those options.
harness::CheckContext check_context(int cases);

// The context of a check that runs named cases (large_offsets,
// large_batches), holding it to `names`.
harness::CheckContext named_cases(std::vector<std::string> names);

// Passes when the check passed; fails with its summary and each failing
// case's shrunk case line, verdict and fixture; a check that could not run
// here skips with why (fails where a GPU is required).
void expect_check_passes(const harness::Suite& s);

}  // namespace ctxscore::test
