#include "property_runner.hpp"

#include "generators.hpp"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace ctxscore::test {

namespace {

struct Failure {
  Case c;
  std::string verdict;
};
std::optional<Failure>& last_failure() {
  static std::optional<Failure> f;
  return f;
}
FailureWriter& writer() {
  static FailureWriter w;
  return w;
}

}  // namespace

std::function<std::string()>& stats_hook() {
  static std::function<std::string()> h;
  return h;
}
std::string stats_line() { return stats_hook() ? stats_hook()() : ""; }
void set_stats_hook(std::function<std::string()> h) { stats_hook() = std::move(h); }

void note_failure(const Case& c, const std::string& verdict) { last_failure() = Failure{c, verdict}; }
void set_failure_writer(FailureWriter w) { writer() = std::move(w); }

void run_property(int cases, const std::function<void()>& property) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = cases;
  if (const char* scale = std::getenv("CTXSCORE_CASE_SCALE")) params.maxSuccess = static_cast<int>(cases * std::atof(scale));
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  rc::detail::TestMetadata meta;
  meta.id = std::string(info->test_suite_name()) + "/" + info->name();
  meta.description = info->name();
  last_failure().reset();
  const auto result = rc::detail::checkProperty(rc::detail::toProperty(property), meta, params);
  std::ostringstream msg;
  rc::detail::printResultMessage(result, msg);
  const auto success = result.template is<rc::detail::SuccessResult>();
  auto& counts = gen::class_counts();
  if (success) std::cout << "OK, passed " << params.maxSuccess << " cases (seed " << params.seed << ")\n";
  if (const std::int64_t n = counts["(cases)"]; n > 0) {
    std::cout << "edge classes over " << n << " generated cases:\n";
    for (const auto& [name, k] : counts)
      if (name != "(cases)") std::cout << "  " << name << ": " << k << " (" << 100.0 * k / n << "%)\n";
  }
  counts.clear();
  if (const auto& stats = stats_line(); !stats.empty()) std::cout << stats << "\n";
  std::cout << std::flush;
  if (success) return;
  msg << "\nseed: " << params.seed << " (replay: RC_PARAMS=\"seed=" << params.seed << "\")";
  if (const auto& f = last_failure()) {
    msg << "\nshrunk case: " << f->c.str() << "\nverdict: " << f->verdict;
    if (writer()) msg << "\nfixture: " << writer()(f->c, f->verdict);
  }
  ADD_FAILURE() << msg.str();
}

}  // namespace ctxscore::test
