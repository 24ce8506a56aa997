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
// fixture path when a fixture writer is linked in.
void run_property(int cases, const std::function<void()>& property);

// Installed by the fixtures library: writes a failing case, returns its path.
// A one-line summary printed after each property (the kernel suite reports
// its comparisons: cases, elements, worst error/bound ratio); empty: none.
void set_stats_hook(std::function<std::string()> hook);
std::string stats_line();

using FailureWriter = std::function<std::string(const Case&, const std::string& verdict)>;
void set_failure_writer(FailureWriter writer);

}  // namespace ctxscore::test
