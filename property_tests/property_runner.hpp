// Runs a RapidCheck property inside a GoogleTest test with a per-test case
// count, and remembers the last failing Case: after shrinking, that is the
// shrunk counterexample, which the runner prints and writes as a fixture.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <functional>
#include <optional>
#include <string>

#include "ctxscore/case.hpp"

namespace ctxscore::test {

// Called by a property on each failing evaluation.
void note_failure(const Case& c, const std::string& verdict);

// Runs `property` for `cases` successes (scaled by CTXSCORE_CASE_SCALE when
// set). On failure: the seed, the shrunk Case line and its verdict, and the
// path of the fixture written for the shrunk case ($CTXSCORE_FAILURE_DIR,
// default ./failures).
void run_property(int cases, const std::function<void()>& property);

// A one-line summary printed after each property (the kernel suite reports
// its comparisons: cases, elements, worst error/bound ratio); empty: none.
void set_stats_hook(std::function<std::string()> hook);
std::string stats_line();

}  // namespace ctxscore::test
