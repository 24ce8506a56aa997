// The gate's verdict, rule by rule, as a user reads it: the exit status the
// command line returns (exit_status), the JSON report's "ok", and the JUnit
// file. Each rule is met by a run that breaks it through the harness's own
// functions (the gate, a campaign, the corpus check), and every reading
// must say "not passed" (label cpu).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/data_dir.hpp"
#include "ctxscore/harness/port.hpp"

namespace ctxscore {
namespace {

namespace fs = std::filesystem;
using harness::Report;
using harness::Suite;

// A folder of this test's own, for failure fixtures and JUnit files.
fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("ctxscore-verdict-" + std::to_string(getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  harness::set_failure_dir((dir / "failures").string());
  return dir;
}

std::string junit_of(const Report& r, const fs::path& dir) {
  const fs::path path = dir / "report.xml";
  harness::write_junit(r, path.string(), true);
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

// Every reading of `r` says it did not pass, the exit status being `status`.
void expect_not_passed(const Report& r, harness::ExitStatus status, const fs::path& dir) {
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.json()["ok"].get<bool>()) << r.json().dump(2);
  EXPECT_EQ(harness::exit_status(r), status) << r.table();
  const std::string xml = junit_of(r, dir);
  EXPECT_TRUE(xml.find("<failure") != std::string::npos || xml.find("<error") != std::string::npos) << xml;
  EXPECT_NE(r.table().find("result: "), std::string::npos);
  EXPECT_EQ(r.table().find("result: every backend that ran passed"), std::string::npos) << r.table();
}

// The numpy port with one of its planted bugs.
std::string planted_port(const std::string& bug) {
  return "PYTHONPATH=" CTXSCORE_SOURCE_DIR "/python exec " + harness::shell_quoted(CTXSCORE_PYTHON) +
         " -m ctxscore.port ctxscore.ports.numpy_port:" + bug + " --tensors numpy";
}

harness::GatePlan small_gate(std::vector<std::string> checks, std::int64_t cases = 10) {
  harness::GatePlan p;
  p.checks = std::move(checks);
  p.drawn.campaign.cases = cases;
  p.drawn.campaign.seed = 7;
  p.drawn.size = "small";
  return p;
}

TEST(VerdictRules, APassingGateReadsPassedEverywhere) {
  const fs::path dir = scratch("passing");
  const auto b = harness::make_backend("reference");
  const Report r = harness::run_gate(*b, small_gate({"fuzz", "repeatability"}));
  EXPECT_TRUE(r.ok()) << r.table();
  EXPECT_TRUE(r.json()["ok"].get<bool>());
  EXPECT_EQ(harness::exit_status(r), harness::kPassed);
  const std::string xml = junit_of(r, dir);
  EXPECT_EQ(xml.find("<failure"), std::string::npos) << xml;
  EXPECT_EQ(xml.find("<error"), std::string::npos) << xml;
}

TEST(VerdictRules, AFailingCaseFailsItsCheck) {
  const fs::path dir = scratch("failing");
  const auto b = harness::make_backend("port", planted_port("cutoff_slack_one"));
  const Report r = harness::run_gate(*b, small_gate({"fuzz"}, 100));
  ASSERT_EQ(r.suites.size(), 1u);
  EXPECT_GT(r.suites[0].stats.failures, 0) << r.table();
  EXPECT_EQ(r.suites[0].status(), "FAILED");
  expect_not_passed(r, harness::kFailed, dir);
}

// A campaign whose floor's stratum is drawn outside its class: the case
// source's shortfall, which must fail the check however right the backend.
TEST(VerdictRules, AnUnmetFloorFailsItsCheck) {
  const fs::path dir = scratch("floor");
  const auto b = harness::make_backend("reference");
  harness::CampaignPlan plan;
  plan.cases = 20;
  plan.seed = 11;
  plan.floors = {{"a class no drawn value holds", 0.5}};
  harness::CampaignSteps<int> steps;
  steps.check = "floor_rule";
  steps.draw = [](std::uint64_t seed, int) { return rc::shrinkable::just(static_cast<int>(seed % 7)); };
  steps.draw_in = [](std::uint64_t, int, const std::string&) -> std::optional<rc::Shrinkable<int>> { return rc::shrinkable::just(0); };
  steps.judge = [](const int&) { return harness::Trial{}; };
  Report r;
  r.suites.push_back(harness::run_campaign(*b, plan, steps, "none"));
  const Suite& s = r.suites[0];
  EXPECT_EQ(s.stats.failures, 0);
  EXPECT_NE(s.coverage.find("a shortfall of the harness's case source, not of the backend"), std::string::npos) << s.coverage;
  EXPECT_NE(s.coverage.find("of seed 11"), std::string::npos) << s.coverage;
  EXPECT_EQ(s.status(), "FAILED");
  expect_not_passed(r, harness::kFailed, dir);
}

// The stratum's share holds over a run's first cases and over each shard's
// of up to 16 (a k-only rule, so that shards judge the unsharded run's
// cases, aliases with some larger shard counts; the merged run's share
// holds whatever the count).
TEST(VerdictRules, AFloorsStratumHoldsItsShareOverEveryShard) {
  const std::vector<harness::Floor> floors = {{"a", 0.05}, {"b", 0.25}};
  for (std::int64_t shards = 1; shards <= 16; ++shards) {
    for (std::int64_t shard = 0; shard < shards; ++shard) {
      std::int64_t a = 0, b = 0, n = 0;
      for (std::int64_t k = shard; k < 200 * shards; k += shards, ++n) {
        const harness::Floor* f = harness::stratum_of(floors, k);
        a += f == &floors[0];
        b += f == &floors[1];
      }
      EXPECT_GT(a, 0) << shards << " shards, shard " << shard;
      EXPECT_NEAR(static_cast<double>(a) / static_cast<double>(n), 0.05, 0.045) << shards << " shards, shard " << shard;
      EXPECT_NEAR(static_cast<double>(b) / static_cast<double>(n), 0.25, 0.045) << shards << " shards, shard " << shard;
    }
  }
}

// A run cut short by a signal: exit 3, and neither the JSON nor the JUnit
// file may read as a pass. In a child process: the stop flag stays set.
TEST(VerdictRules, AnInterruptedRunIsNotOk) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const fs::path dir = scratch("interrupted");
  EXPECT_EXIT(
      {
        harness::install_stop_signals();
        raise(SIGINT);
        const auto b = harness::make_backend("reference");
        const Report r = harness::run_gate(*b, small_gate({"fuzz"}));
        const std::string xml = junit_of(r, dir);
        const bool right = r.interrupted_by == SIGINT && !r.ok() && !r.json()["ok"].get<bool>() &&
                           harness::exit_status(r) == harness::kInterrupted && xml.find("<error") != std::string::npos;
        std::fprintf(stderr, "%s\n", right ? "every reading says interrupted" : r.json().dump().c_str());
        std::_Exit(right ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "every reading says interrupted");
}

TEST(VerdictRules, ARequiredCheckThatDidNotRunFails) {
  const fs::path dir = scratch("required");
  const auto b = harness::make_backend("reference");
  harness::GatePlan plan = small_gate({"geometry"});
  const Report optional = harness::run_gate(*b, plan);
  ASSERT_FALSE(optional.suites[0].not_run.empty());
  EXPECT_TRUE(optional.ok()) << optional.table();  // not run, and not required: a pass with a warning
  EXPECT_NE(junit_of(optional, dir).find("<skipped"), std::string::npos);
  plan.required = {"geometry"};
  const Report r = harness::run_gate(*b, plan);
  EXPECT_EQ(r.suites[0].status(), "NOT RUN (required)");
  expect_not_passed(r, harness::kFailed, dir);
}

TEST(VerdictRules, TooFewCasesJudgedFails) {
  const fs::path dir = scratch("too_few");
  const auto b = harness::make_backend("reference");
  harness::GatePlan plan = small_gate({"fuzz"}, 1 << 20);
  plan.time_budget = 0.05;  // a million cases cannot be judged in 50 ms
  const Report r = harness::run_gate(*b, plan);
  ASSERT_EQ(r.suites.size(), 1u);
  EXPECT_EQ(r.suites[0].stats.failures, 0);
  EXPECT_TRUE(r.suites[0].too_few()) << r.table();
  expect_not_passed(r, harness::kFailed, dir);
}

TEST(VerdictRules, AnUnreadableFixtureIsBadInputNotAPass) {
  const fs::path dir = scratch("unreadable");
  const fs::path bad = dir / "truncated.safetensors";
  std::ofstream(bad) << "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":";
  const auto b = harness::make_backend("reference");
  harness::CorpusOptions o;
  o.min_cases = 0;  // judging nothing is a failure of its own (TooFewCasesJudgedFails): here only the unreadable file counts
  Report r;
  r.suites.push_back(harness::check_corpus(*b, {bad}, o));
  EXPECT_FALSE(r.suites[0].too_few());
  EXPECT_EQ(r.suites[0].errors, 1) << r.table();
  EXPECT_EQ(r.suites[0].stats.failures, 0);
  expect_not_passed(r, harness::kBadInput, dir);
}

// A backend that fails beside a fixture that does not read: the failure
// decides the exit status (1), not the bad input (2).
TEST(VerdictRules, AFailingCaseOutweighsAnUnreadableFixture) {
  const fs::path dir = scratch("failing_and_unreadable");
  const fs::path bad = dir / "truncated.safetensors";
  std::ofstream(bad) << "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":";
  std::vector<fs::path> files = harness::fixture_files({CTXSCORE_SOURCE_DIR "/fixtures/corpus"});
  files.push_back(bad);
  const auto b = harness::make_backend("port", planted_port("cutoff_slack_one"));
  Report r;
  r.suites.push_back(harness::check_corpus(*b, files, {}));
  EXPECT_GT(r.suites[0].stats.failures, 0) << r.table();
  EXPECT_EQ(r.suites[0].errors, 1);
  expect_not_passed(r, harness::kFailed, dir);
}

TEST(VerdictRules, ABackendThatCouldNotRunWhereRequiredFails) {
  const fs::path dir = scratch("backend_absent");
  Report r;
  r.required_absent.push_back("hip: no GPU");
  expect_not_passed(r, harness::kFailed, dir);
}

}  // namespace
}  // namespace ctxscore
