// Runs a RapidCheck property inside a GoogleTest test through the harness's
// campaign (campaign.hpp), the loop every check of the gate runs: case k
// drawn from (seed, test, k), a floor's stratum drawn into its class, the
// failing case shrunk and written as a fixture with its replay line.
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

// Called by a property on each failing evaluation: `c` is the case its
// fixture holds, `verdict` what failed; `backend_flags` selects the backend
// again in the fixture's replay line.
void note_failure(const Case& c, const std::string& verdict, const std::string& backend_flags = "--backend reference");

// Asserts `v` passed; otherwise records it (its case, for the fixture) and
// fails the RapidCheck case with the verdict.
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

// A property's coverage floors are the harness's (campaign.hpp): `share` of
// its cases, a stratum, are drawn on purpose to fall in the edge class
// `claim` (the property's draws are searched for one in the class; one
// decided outside it stops where it is classified), so that a floor fails
// only where the property's generators cannot reach its class.
using harness::Floor;

// Runs `property` over `cases` cases (scaled by CTXSCORE_CASE_SCALE when
// set), drawn from RapidCheck's seed (RC_PARAMS="seed=N" replays the run).
// On failure: the seed, the shrunk case line (or the values, where the
// property drew no case) and its verdict, and the fixture written for the
// shrunk case (harness::failure_dir()). The run's edge classes and floors
// are printed; a floor whose stratum missed its class fails the test.
void run_property(int cases, const std::function<void()>& property, const std::vector<Floor>& floors = {});

// What built and runs the implementation under test, recorded in failure
// fixtures: the property backend's (OnPropertyBackend sets it), else this
// process's host compiler.
void set_toolchain(const std::string& toolchain);

// Verdicts of the current property, summed; printed and cleared after it.
harness::JudgeStats& property_stats();

}  // namespace ctxscore::test
