#include "property_runner.hpp"

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
  if (result.template is<rc::detail::SuccessResult>()) {
    std::cout << msg.str() << std::endl;
    return;
  }
  msg << "\nseed: " << params.seed << " (replay: RC_PARAMS=\"seed=" << params.seed << "\")";
  if (const auto& f = last_failure()) {
    msg << "\nshrunk case: " << f->c.str() << "\nverdict: " << f->verdict;
    if (writer()) msg << "\nfixture: " << writer()(f->c, f->verdict);
  }
  ADD_FAILURE() << msg.str();
}

}  // namespace ctxscore::test
