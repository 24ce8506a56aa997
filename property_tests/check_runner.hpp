// The harness's checks inside GoogleTest: the backend properties are thin
// callers of them (checks.hpp), with RapidCheck's seed and the case scale.
#pragma once

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::test {

// A harness check's options for a test: `cases` scaled by
// CTXSCORE_CASE_SCALE, the seed RapidCheck's (RC_PARAMS="seed=N" replays a
// run), every failing case judged no further than the first.
harness::CheckOptions check_options(int cases);

// Passes when the check passed; fails with its summary and each failing
// case's shrunk case line, verdict and fixture; a check that could not run
// here skips with why (fails where a GPU is required).
void expect_check_passes(const harness::Suite& s);

}  // namespace ctxscore::test
