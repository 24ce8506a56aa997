#include "check_runner.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "ctxscore/harness/run_control.hpp"

namespace ctxscore::test {

namespace {

// CTest's resource group names the GPU this process may use: it is made the
// only visible one while the binary starts, before any GPU call (a test
// environment would not run where a filter selects no test).
const bool kCtestGpuAssigned = [] {
  if (const std::string gpu = harness::apply_ctest_gpu_assignment(); !gpu.empty())
    std::cout << "CTest resource: " << gpu << " (CUDA_VISIBLE_DEVICES=" << std::getenv("CUDA_VISIBLE_DEVICES") << ")"
              << std::endl;
  return true;
}();

}  // namespace

harness::CheckOptions check_options(int cases) {
  harness::CheckOptions o;
  o.campaign.cases = cases;
  if (const char* scale = std::getenv("CTXSCORE_CASE_SCALE"))
    o.campaign.cases = std::max<std::int64_t>(1, static_cast<std::int64_t>(cases * std::atof(scale)));
  o.campaign.seed = rc::detail::configuration().testParams.seed;
  return o;
}

harness::CheckContext check_context(int cases) {
  harness::CheckContext x;
  x.drawn = check_options(cases);
  return x;
}

harness::CheckContext named_cases(std::vector<std::string> names) {
  harness::CheckContext x;
  x.only = std::move(names);
  return x;
}

void expect_check_passes(const harness::Suite& s) {
  std::cout << s.backend << " " << s.summary() << std::endl;
  if (!s.not_run.empty()) {
    if (const char* v = std::getenv("CTXSCORE_REQUIRE_GPU"); v && *v && std::string(v) != "0")
      ADD_FAILURE() << s.summary() << " (CTXSCORE_REQUIRE_GPU)";
    else
      GTEST_SKIP() << s.not_run;
    return;
  }
  if (s.ok()) return;
  std::ostringstream msg;
  msg << s.summary() << "\ntoolchain: " << s.toolchain << "\nseed: " << s.seed << " (replay: RC_PARAMS=\"seed=" << s.seed << "\")";
  for (const harness::Row& r : s.rows)
    if (!r.ok)
      msg << "\n" << (r.spec.empty() ? "" : "shrunk case: " + r.spec + "\n") << "verdict: " << r.message
          << (r.where.empty() ? "" : "\nfixture: " + r.where.str());
  ADD_FAILURE() << msg.str();
}

}  // namespace ctxscore::test
