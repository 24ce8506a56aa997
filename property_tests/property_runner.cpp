#include "property_runner.hpp"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <utility>

#include "ctxscore/contents.hpp"
#include "ctxscore/harness/generators.hpp"

namespace ctxscore::test {

namespace {

using Evaluation = rc::detail::CaseDescription;

// "Suite/Test" of the running GoogleTest test: a failure's `found_by`.
std::string current_test_id() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "/" + info->name();
}

// What the property's evaluation on this thread noted of its failure.
std::optional<harness::Trial>& noted() {
  thread_local std::optional<harness::Trial> t;
  return t;
}

// A property's case, evaluated once when drawn; its shrinks are the
// property's own, evaluated as the campaign shrinks it.
class Evaluated {
 public:
  Evaluated(Evaluation value, rc::Shrinkable<Evaluation> from) : value_(std::move(value)), from_(std::move(from)) {}
  Evaluation value() const { return value_; }
  rc::Seq<rc::Shrinkable<Evaluation>> shrinks() const { return from_.shrinks(); }

 private:
  Evaluation value_;
  rc::Shrinkable<Evaluation> from_;
};

// The draws one case may take: past a discarded one (RC_PRE), or, for a
// floor's stratum, past those outside its class. A class the property's
// generators reach in one draw of 100 misses 1000 in a row once in 10^4
// runs of a stratum case; one they cannot reach misses every time.
constexpr int kDrawsPerCase = 1000;

// Case `seed` of the property: its first draw that is not discarded and,
// where `claim` is named, falls in that class, or that fails. Draws set
// aside count nothing in the run's coverage.
rc::Shrinkable<Evaluation> draw_case(const rc::detail::Property& property, std::uint64_t seed, int size, const std::string& claim) {
  gen::Coverage& coverage = gen::coverage();
  std::optional<rc::Shrinkable<Evaluation>> last;
  for (int draw = 0; draw < kDrawsPerCase; ++draw) {
    const std::map<std::string, std::int64_t> before = coverage.counts();
    const std::int64_t held_before = coverage.held(claim);
    noted().reset();
    // Some classes need room (a rank past 1, several heads): the size grows
    // draw by draw up to RapidCheck's largest.
    const int grown = std::min(100, size + draw / 8 * 10);
    const rc::Shrinkable<Evaluation> drawn =
        property(rc::Random(draw == 0 ? seed : splitmix(seed + static_cast<std::uint64_t>(draw))), grown);
    coverage.probe(claim);  // a case decided outside the class stops at once
    Evaluation e = drawn.value();
    const bool missed = coverage.missed();
    coverage.probe("");
    if (missed) {
      coverage.restore(before);
      continue;
    }
    for (const std::string& tag : e.tags) coverage.count(tag, true);  // RC_CLASSIFY's classes
    const auto type = e.result.type;
    const bool held = claim.empty() || coverage.held(claim) > held_before;
    last = rc::makeShrinkable<Evaluated>(std::move(e), drawn);
    if (type == rc::detail::CaseResult::Type::Failure || (type == rc::detail::CaseResult::Type::Success && held)) return *last;
    coverage.restore(before);
  }
  // Every draw set aside: the last, judged as it is (a discard fails, a
  // draw outside its class is the floor's miss).
  return last ? *last : property(rc::Random(seed), size);
}

std::string example_text(const Evaluation& e) {
  if (!e.example) return "(no values recorded)";
  std::string text;
  for (const auto& [type, value] : e.example()) text += (text.empty() ? "" : "; ") + type + ": " + value;
  return text.empty() ? "(no values drawn)" : text;
}

// The trial of one evaluation: the failure its property noted (a verdict on
// a case), else RapidCheck's result on the values it drew.
harness::Trial judged(const Evaluation& e) {
  std::optional<harness::Trial> failure = std::exchange(noted(), std::nullopt);
  harness::Trial t;
  switch (e.result.type) {
    case rc::detail::CaseResult::Type::Success: return t;
    case rc::detail::CaseResult::Type::Discard:
      t.verdict.fail(harness::Fault::property, "every one of " + std::to_string(kDrawsPerCase) +
                                                   " draws was discarded: " + e.result.description);
      break;
    case rc::detail::CaseResult::Type::Failure:
      if (failure) return *failure;
      t.verdict.fail(harness::Fault::property, e.result.description);
      break;
  }
  t.not_a_case = example_text(e);
  return t;
}

// A failure of the property's own claim on case `c`.
harness::Trial property_failure(const Case& c, const std::string& verdict, const std::string& backend_flags) {
  harness::Trial t;
  t.verdict.spec = c;
  t.verdict.fail(harness::Fault::property, verdict);
  t.replay_flags = backend_flags;
  return t;
}

}  // namespace

harness::JudgeStats& property_stats() {
  static harness::JudgeStats s;
  return s;
}

void note_failure(const Case& c, const std::string& verdict, const std::string& backend_flags) {
  noted() = property_failure(c, verdict, backend_flags);
}

void require(const harness::Verdict& v, const std::string& backend_flags) {
  property_stats().add(v);
  if (v.ok()) return;
  harness::Trial t{v, backend_flags, std::nullopt};
  noted() = t;
  RC_FAIL(v.str());
}

std::string& toolchain() {
  static std::string t = harness::host_toolchain();
  return t;
}

void set_toolchain(const std::string& t) { toolchain() = t; }

namespace {

// The failing case's line (or the values, where the property drew no
// case), its verdict, and the fixture written for it.
std::string counterexample(const harness::Trial& t, const harness::FailureFile& fixture, bool shrunk) {
  const std::string what = t.not_a_case ? "values: " + *t.not_a_case : "case: " + t.verdict.spec.str();
  // A property's own claim is its text; a backend's verdict says which backend and oracle.
  const std::string verdict = t.verdict.fault == harness::Fault::property ? t.verdict.error : t.verdict.str();
  return "\n" + std::string(shrunk ? "shrunk " : "") + what + "\nverdict: " + verdict + "\nfixture: " + fixture.str();
}

void print_coverage(const harness::Suite& s) {
  const std::int64_t n = s.stats.cases;
  if (!s.classes.empty() && n > 0) {
    std::cout << "edge classes over " << n << " cases:\n";
    for (const auto& [name, k] : s.classes) std::cout << "  " << name << ": " << k << " (" << 100.0 * k / n << "%)\n";
  }
  if (s.floors.empty()) return;
  std::cout << "coverage floors over " << n << " cases:\n";
  for (const harness::StratumTally& f : s.floors) {
    const std::int64_t k = s.classes.count(f.claim) ? s.classes.at(f.claim) : 0;
    std::cout << "  " << f.claim << ": " << (n > 0 ? 100.0 * k / n : 0.0) << "% (floor " << 100.0 * f.share
              << "%, drawn into it " << f.drawn << ", held " << f.held << ") " << (f.held == f.drawn ? "met" : "NOT MET") << "\n";
  }
}

}  // namespace

void run_property(int cases, const std::function<void()>& property, const std::vector<Floor>& floors) {
  const rc::detail::Property drawn = rc::detail::toProperty(property);
  harness::CampaignPlan plan;
  plan.cases = cases;
  if (const char* scale = std::getenv("CTXSCORE_CASE_SCALE")) plan.cases = static_cast<std::int64_t>(cases * std::atof(scale));
  plan.seed = rc::detail::configuration().testParams.seed;
  plan.floors = floors;
  plan.shrink_calls = 1000;
  plan.shrink_seconds = 120;
  const std::string id = current_test_id();
  harness::CampaignSteps<Evaluation> steps;
  steps.check = id;
  steps.draw = [&drawn](std::uint64_t seed, int size) { return draw_case(drawn, seed, size, ""); };
  steps.draw_in = [&drawn](std::uint64_t seed, int size, const std::string& claim) -> std::optional<rc::Shrinkable<Evaluation>> {
    return draw_case(drawn, seed, size, claim);
  };
  // The last failing trial is the shrunk one: the shrink keeps each smaller failure.
  std::optional<harness::Trial> failing;
  steps.judge = [&failing](const Evaluation& e) {
    harness::Trial t = judged(e);
    if (!t.verdict.ok()) failing = t;
    return t;
  };
  property_stats() = {};
  noted().reset();
  const harness::Suite s = harness::run_campaign(harness::Subject{"property", toolchain()}, plan, steps, "the property's claim");
  if (s.stats.failures == 0) std::cout << "OK, passed " << s.stats.cases << " cases (seed " << plan.seed << ")\n";
  print_coverage(s);
  if (property_stats().cases > 0) std::cout << "verdicts: " << property_stats().str() << "\n";
  std::cout << std::flush;
  const std::string replay = "seed: " + std::to_string(plan.seed) + " (replay: RC_PARAMS=\"seed=" + std::to_string(plan.seed) + "\")";
  if (!s.coverage.empty()) ADD_FAILURE() << s.coverage << "\n" << replay;
  if (s.too_few()) ADD_FAILURE() << "judged " << s.stats.cases << " of " << s.min_cases << " cases: " << s.stopped << "\n" << replay;
  if (s.stats.failures == 0) return;
  const harness::Row& row = s.rows.back();
  // Every failing trial passed through steps.judge, which kept the last (the shrunk one).
  ADD_FAILURE() << "Falsifiable: " << row.name << "\ntoolchain: " << toolchain() << "\n" << replay
                << counterexample(failing.value(), row.where, true);
}

void fail_with_case(const Case& c, const std::string& verdict, const std::string& backend_flags) {
  const harness::Trial t = property_failure(c, verdict, backend_flags);
  const harness::FailureFile fixture =
      harness::write_failure_fixture(c, harness::FailureRecord{current_test_id(), c.seed, std::nullopt, false, toolchain()}, backend_flags);
  ADD_FAILURE() << "toolchain: " << toolchain() << counterexample(t, fixture, false);
}

}  // namespace ctxscore::test
