#include "property_runner.hpp"

#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>

#include "ctxscore/harness/generators.hpp"

namespace ctxscore::test {

namespace {

struct Failure {
  Case c;
  std::string verdict, backend_flags;
};
// "Suite/Test" of the running GoogleTest test: a failure's `found_by`.
std::string current_test_id() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "/" + info->name();
}

std::optional<Failure>& last_failure() {
  static std::optional<Failure> f;
  return f;
}

}  // namespace

harness::JudgeStats& property_stats() {
  static harness::JudgeStats s;
  return s;
}

void note_failure(const Case& c, const std::string& verdict, const std::string& backend_flags) {
  last_failure() = Failure{c, verdict, backend_flags};
}

void require(const harness::Verdict& v, const std::string& backend_flags) {
  property_stats().add(v);
  if (v.ok()) return;
  note_failure(v.spec, v.str(), backend_flags);
  RC_FAIL(v.str());
}

std::string& toolchain() {
  static std::string t = harness::host_toolchain();
  return t;
}

void set_toolchain(const std::string& t) { toolchain() = t; }

namespace {

// The failing case's line, its verdict, and the fixture written for it.
std::string counterexample(const Failure& f, const std::string& found_by, std::uint64_t seed, bool shrunk) {
  return "\n" + std::string(shrunk ? "shrunk case: " : "case: ") + f.c.str() + "\nverdict: " + f.verdict +
         "\nfixture: " +
         harness::write_failure_fixture(f.c, harness::FailureRecord{found_by, seed, std::nullopt, shrunk, toolchain()},
                                        f.backend_flags).str();
}

}  // namespace

void run_property(int cases, const std::function<void()>& property, const std::vector<Floor>& floors) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  if (const char* scale = std::getenv("CTXSCORE_CASE_SCALE")) params.maxSuccess = static_cast<int>(cases * std::atof(scale));
  rc::detail::TestMetadata meta;
  meta.id = current_test_id();
  meta.description = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  last_failure().reset();
  property_stats() = {};
  gen::class_counts().clear();  // a plain RapidCheck property before this one may have classified too
  std::int64_t evaluated = 0;
  const auto counted = [&] {
    ++evaluated;
    property();
  };
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(counted), meta, params);
  std::ostringstream msg;
  rc::detail::printResultMessage(result, msg);
  const auto success = result.template is<rc::detail::SuccessResult>();
  auto& counts = gen::class_counts();
  if (success) std::cout << "OK, passed " << params.maxSuccess << " cases (seed " << params.seed << ")\n";
  if (!counts.empty() && evaluated > 0) {
    std::cout << "edge classes over " << evaluated << " cases:\n";
    for (const auto& [name, k] : counts) std::cout << "  " << name << ": " << k << " (" << 100.0 * k / evaluated << "%)\n";
  }
  // Floors are judged over a passing run only (a failing one stops early and
  // shrinks), and over enough cases for a share to mean something.
  constexpr std::int64_t kFloorCases = 100;
  if (success && !floors.empty() && evaluated < kFloorCases)
    std::cout << "coverage floors not judged: " << evaluated << " cases, fewer than " << kFloorCases << "\n";
  if (success && !floors.empty() && evaluated >= kFloorCases) {
    std::cout << "coverage floors over " << evaluated << " cases:\n";
    for (const Floor& f : floors) {
      const std::int64_t k = counts.count(f.claim) ? counts[f.claim] : 0;
      const double share = evaluated > 0 ? static_cast<double>(k) / static_cast<double>(evaluated) : 0.0;
      const bool met = share >= f.share;
      std::cout << "  " << f.claim << ": " << 100.0 * share << "% (floor " << 100.0 * f.share << "%) "
                << (met ? "met" : "NOT MET") << "\n";
      if (!met)
        ADD_FAILURE() << "coverage floor not met: \"" << f.claim << "\" in " << k << " of " << evaluated
                      << " cases (" << 100.0 * share << "%), expected at least " << 100.0 * f.share
                      << "% (seed " << params.seed << ")";
    }
  }
  counts.clear();
  if (property_stats().cases > 0) std::cout << "verdicts: " << property_stats().str() << "\n";
  std::cout << std::flush;
  if (success) return;
  msg << "\ntoolchain: " << toolchain();
  msg << "\nseed: " << params.seed << " (replay: RC_PARAMS=\"seed=" << params.seed << "\")";
  if (const auto& f = last_failure()) msg << counterexample(*f, meta.id, params.seed, true);
  ADD_FAILURE() << msg.str();
}

void fail_with_case(const Case& c, const std::string& verdict, const std::string& backend_flags) {
  ADD_FAILURE() << "toolchain: " << toolchain()
                << counterexample(Failure{c, verdict, backend_flags}, current_test_id(), c.seed, false);
}

}  // namespace ctxscore::test
