#include "property_runner.hpp"

#include "generators.hpp"

#include <algorithm>
#include <filesystem>

#include "ctxscore/fixture.hpp"

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
// The shrunk case as a replayable fixture, in $CTXSCORE_FAILURE_DIR
// (default ./failures); returns the path, or why none was written.
std::string write_failure(const Case& c, const std::string& test_id, std::uint64_t seed) {
  const char* env = std::getenv("CTXSCORE_FAILURE_DIR");
  const std::filesystem::path dir = env && *env ? env : "failures";
  std::string name = test_id + "_seed" + std::to_string(seed) + ".safetensors";
  std::replace(name.begin(), name.end(), '/', '_');
  try {
    std::filesystem::create_directories(dir);
    const std::string path = (dir / name).string();
    write_fixture(path, make_fixture(c));
    return path + " (replay: ctxscore fixtures check " + path + " --backend hip)";
  } catch (const std::exception& e) {
    return std::string("not written: ") + e.what();
  }
}

}  // namespace

std::function<std::string()>& stats_hook() {
  static std::function<std::string()> h;
  return h;
}
std::string stats_line() { return stats_hook() ? stats_hook()() : ""; }
void set_stats_hook(std::function<std::string()> h) { stats_hook() = std::move(h); }

void note_failure(const Case& c, const std::string& verdict) { last_failure() = Failure{c, verdict}; }

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
    msg << "\nfixture: " << write_failure(f->c, meta.id, params.seed);
  }
  ADD_FAILURE() << msg.str();
}

}  // namespace ctxscore::test
