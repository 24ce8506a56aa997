// Runs a RapidCheck property inside a GoogleTest test with a per-test case
// count, and remembers the last failing Case: after shrinking, that is the
// shrunk counterexample, which the runner prints and writes as a fixture
// (through the harness's failure writer: one folder, one replay line).
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"
#include "ctxscore/harness/campaign.hpp"
#include "ctxscore/harness/judge.hpp"

namespace ctxscore::test {

// Called by a property on each failing evaluation; `backend_flags` selects
// the backend again in the fixture's replay line.
void note_failure(const Case& c, const std::string& verdict, const std::string& backend_flags = "--backend reference");

// Asserts `v` passed; otherwise records it for the fixture and fails the
// RapidCheck case with the verdict.
void require(const harness::Verdict& v, const std::string& backend_flags);

// Returns what `call` returns. A backend that throws fails the RapidCheck
// case as a failure of `c`, recorded for the fixture like a failing
// verdict, its message after `what`: a property that calls a backend
// directly keeps its counterexample when the call raises.
template <class Call>
auto on_case(const Case& c, const std::string& backend_flags, const std::string& what, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    note_failure(c, what + ": " + e.what(), backend_flags);
    RC_FAIL(what + ": " + e.what());
  }
}

// Fails the current test, outside a property, with `c` as its
// counterexample: the case line, `verdict`, the fixture written for it.
void fail_with_case(const Case& c, const std::string& verdict, const std::string& backend_flags);

// A property's coverage floors are the harness's (campaign.hpp): at least
// `share` of its cases fall in the edge class `claim`, or the property
// cannot reach what it claims often enough.
using harness::Floor;


// Runs `property` for `cases` successes (scaled by CTXSCORE_CASE_SCALE when
// set). On failure: the seed, the shrunk Case line and its verdict, and the
// fixture written for the shrunk case (harness::failure_dir()). After a
// pass over at least 100 cases, each floor is checked against the cases run
// and printed; one not met fails the test, naming the class, its share and
// the floor. A run scaled below 100 cases says its floors were not judged.
void run_property(int cases, const std::function<void()>& property, const std::vector<Floor>& floors = {});

// What built and runs the implementation under test, recorded in failure
// fixtures: the property backend's (OnPropertyBackend sets it), else this
// process's host compiler.
void set_toolchain(const std::string& toolchain);

// Verdicts of the current property, summed; printed and cleared after it.
harness::JudgeStats& property_stats();

}  // namespace ctxscore::test
