// A campaign: the loop every drawn check runs. Case k of a run is drawn
// from a hash of (seed, check, k), judged, and the first failing case (by
// default) is made small, written as a replayable fixture and reported; a
// run that judged fewer cases than its floor fails, so a budget or a
// signal can cut a run short but never turn "nothing judged" into a pass.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/generators.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/report.hpp"
#include "ctxscore/harness/run_control.hpp"

namespace ctxscore::harness {

// A coverage floor: `share` of a run's cases fall in the edge class `claim`
// (a gen::classify name, or one counted with gen::count_class). A campaign
// meets it by construction: that share of its cases, a stratum chosen by
// the case's index alone, are drawn on purpose to fall in the class, and
// the floor fails only where a case drawn so misses it: a shortfall of the
// case source, never of the backend, and never luck.
struct Floor {
  std::string claim;
  double share;
};

// The floor whose stratum case k falls in, or nullptr: the floors' shares
// laid end to end on [0, 1) against frac(k·φ), a Weyl sequence, so that a
// stratum's share holds over the first n cases of a run and over every
// shard's cases k ≡ K (mod N) alike, whatever the seed.
const Floor* stratum_of(const std::vector<Floor>& floors, std::int64_t k);

// Where a run says what happens while it runs (a failure as it is found,
// progress): the CLI writes it to stderr; empty, the run is silent and its
// suite says everything.
using Say = std::function<void(const std::string& text)>;

struct CampaignPlan {
  std::int64_t cases = 100;
  std::int64_t min_cases = -1;    // the floor of cases judged; -1: every case asked of this shard
  std::uint64_t seed = 1;
  std::int64_t max_failures = 1;  // stop after this many failing cases; 0: judge them all
  int shrink_calls = 200;         // calls one shrink may make
  double shrink_seconds = 60;     // and seconds
  std::int64_t shard_index = 0, shard_count = 1;  // case k runs where k % count == index
  Say say;                        // failures and progress as they happen
  std::vector<Floor> floors;      // strata drawn into their classes (CampaignSteps::draw_in), judged over a passing run
  const TimeBudget* budget = nullptr;  // none: unlimited
  std::int64_t only_case = -1;    // >= 0: judge case k = only_case alone (a failure's case drawn again)
  // The command line that draws a case of this run again, less its check,
  // seed and case ("PROGRAM gate --port ... --case-size small"); empty: none printed.
  std::string redraw;
};

// Case k's seed in a run: a hash of the run's seed, the check and k, so
// neighbouring seeds and different checks share no cases.
std::uint64_t case_seed(std::uint64_t run_seed, const std::string& check, std::int64_t k);
// Case k's RapidCheck size: 10, 20, ... 100, then again, so that a run
// starts with small cases (a failure there is found and shrunk fast) and
// every tenth case spans the generators' whole ranges.
inline int case_size(std::int64_t k) { return static_cast<int>(k % 10 + 1) * 10; }

// What judging one drawn value found.
struct Trial {
  Verdict verdict;           // ok() whether it passed; spec the case a failure fixture records
  std::string replay_flags;  // select the backend and how the case is judged, for the fixture's replay line
  // The failing value in words where it holds no case (a property's own
  // values): no fixture can hold it, and the failure shows it instead.
  std::optional<std::string> not_a_case = std::nullopt;
};

template <class T>
struct CampaignSteps {
  std::string check;                                              // the suite's name and the fixture's found_by
  std::function<rc::Shrinkable<T>(std::uint64_t case_seed, int size)> draw;  // size: RapidCheck's, case_size()
  // A value in a floor's class (its claim), for the cases of its stratum;
  // nullopt where the run cannot hold the class at all (no compile key of
  // the run reaches it), which the suite then names.
  std::function<std::optional<rc::Shrinkable<T>>(std::uint64_t case_seed, int size, const std::string& claim)> draw_in;
  std::function<Trial(const T&)> judge;
  std::function<void(const T&)> classify;                         // optional: the edge classes of a drawn value
  std::function<std::vector<T>(const T&)> smaller;                // optional: smaller values beyond the generator's shrinks
  std::function<void(Suite&)> finish;                             // optional: a check's own totals, after a passing run
  // Whether one call shows the claim's failure (fuzz, refusals): else the
  // fixture's line is "one call again", and the drawn case's line reproduces.
  bool one_call_shows_it = true;
};

// What a campaign judges: its name and what built it, as its suite and its
// failure fixtures record them.
struct Subject {
  std::string name, toolchain;
};
// The suite a check of `who` reports into.
Suite suite_for(const std::string& check, const Subject& who, const std::string& oracle);
Suite suite_for(const std::string& check, Backend& b, const std::string& oracle);
// RapidCheck keeps the context its generators run in (operator*) in
// process-wide statics: checks run side by side draw, evaluate and shrink
// their values under this lock, one at a time, and judge them outside it.
std::unique_lock<std::recursive_mutex> generating();
// Why a loop stops before its next case: a stop signal or the spent budget; empty to go on.
std::string stop_reason(const TimeBudget* budget, std::int64_t judged);
// Judges the floors' strata (s.floors) into s.coverage (a miss, with its
// seed and the line that draws it again) and names in s.oracle a class the
// run cannot hold.
void judge_floors(Suite& s, const CampaignPlan& plan, const std::string& check);
// Throws std::invalid_argument where the floors' shares sum past 1: their
// strata, laid end to end, would leave the last ones short.
void check_floor_shares(const std::vector<Floor>& floors);
// Writes a failing trial's case as a fixture and returns its path and replay
// line (or why none was written: a value that is not a case).
FailureFile record_failure(const Suite& s, const Trial& t, std::uint64_t seed, bool one_call_shows_it = true);
// Whether a failing verdict is a port that hung: shrinking it would cost a timeout a step.
bool hung(const Verdict& v);
// The line that draws case k of the run again, or "" where the plan has none.
std::string redraw_line(const CampaignPlan& plan, const std::string& check, std::int64_t k);
// What a run says of a failing case as it is found: its case, verdict, fixture and the line that draws it again.
std::string failure_text(const Suite& s, std::int64_t k, std::uint64_t seed, const Trial& t, const std::string& fixture,
                         const std::string& again);

namespace detail {

// Greedy: the first smaller value that still fails, round after round,
// until none does or the calls or seconds run out: the domain's smaller
// values where the check has them, else the generator's shrinks. Returns
// the smallest failure.
template <class T>
Trial shrink(const CampaignSteps<T>& steps, rc::Shrinkable<T> failing, Trial found, const CampaignPlan& plan) {
  const TimeBudget limit(plan.shrink_seconds);
  int calls = 0;
  const auto spent = [&] { return calls >= plan.shrink_calls || limit.spent() || (plan.budget && plan.budget->spent()); };
  const auto fails = [&](const T& candidate, Trial& into) {
    ++calls;
    Trial t = steps.judge(candidate);
    if (t.verdict.ok() || t.verdict.fault == Fault::out_of_contract) return false;
    into = t;
    return true;
  };
  try {
    // The domain's big steps first (fewer requests, one head, world 1):
    // they converge in a few dozen calls where the generator's shrinks
    // would spend the calls on one table entry at a time.
    bool domain_shrank = false;
    if (steps.smaller) {
      T value = [&] {
        const auto lock = generating();
        return failing.value();
      }();
      for (bool smaller = true; smaller && !spent();) {
        smaller = false;
        for (const T& candidate : steps.smaller(value)) {
          if (spent()) break;
          if (!fails(candidate, found)) continue;
          value = candidate;
          smaller = domain_shrank = true;
          break;
        }
      }
    }
    for (bool smaller = !domain_shrank; smaller && !spent();) {
      smaller = false;
      auto lock = generating();
      rc::Seq<rc::Shrinkable<T>> candidates = failing.shrinks();
      while (rc::Maybe<rc::Shrinkable<T>> next = candidates.next()) {
        if (spent()) break;
        const T value = next->value();
        lock.unlock();
        const bool still_fails = fails(value, found);
        lock.lock();
        if (!still_fails) continue;
        failing = *next;
        smaller = true;
        break;
      }
    }
  } catch (const Interrupted&) {
    // keep the smallest failure found so far; the run loop names the signal
  }
  return found;
}

}  // namespace detail

template <class T>
Suite run_campaign(const Subject& who, const CampaignPlan& plan, const CampaignSteps<T>& steps, const std::string& oracle) {
  check_floor_shares(plan.floors);
  Suite s = suite_for(steps.check, who, oracle);
  s.seed = std::to_string(plan.seed);
  const bool one = plan.only_case >= 0;
  const std::int64_t first = one ? plan.only_case : plan.shard_index, step = one ? 1 : plan.shard_count;
  const std::int64_t end = one ? plan.only_case + 1 : plan.cases;
  const std::int64_t mine = one ? 1 : (plan.cases - plan.shard_index + plan.shard_count - 1) / plan.shard_count;
  s.min_cases = plan.min_cases < 0 ? mine : std::min(plan.min_cases, mine);
  gen::Coverage coverage;
  const gen::CoverageScope counting(coverage);
  Progress progress;
  const auto t0 = std::chrono::steady_clock::now();
  for (const Floor& f : plan.floors) s.floors.push_back(StratumTally{f.claim, f.share});
  for (std::int64_t k = first; k < end; k += step) {
    if (s.stopped = stop_reason(plan.budget, s.stats.cases); !s.stopped.empty()) break;
    const std::uint64_t seed = case_seed(plan.seed, steps.check, k);
    const Floor* stratum = steps.draw_in ? stratum_of(plan.floors, k) : nullptr;
    // Counted from before the draw: drawing a value may already classify it.
    const std::int64_t held_before = stratum ? coverage.held(stratum->claim) : 0;
    std::optional<rc::Shrinkable<T>> in_class;
    std::optional<rc::Shrinkable<T>> drawn;
    std::optional<T> value;
    {
      const auto lock = generating();
      if (stratum) in_class = steps.draw_in(seed, case_size(k), stratum->claim);
      drawn = in_class ? *in_class : steps.draw(seed, case_size(k));
      value = drawn->value();
    }
    if (steps.classify) steps.classify(*value);
    Trial t;
    try {
      t = steps.judge(*value);
    } catch (const Interrupted&) {
      continue;  // not judged; the next round names the signal
    }
    if (stratum)
      s.floors[static_cast<std::size_t>(stratum - plan.floors.data())].add(k, in_class.has_value(),
                                                                            coverage.held(stratum->claim) > held_before);
    FailureFile fixture;
    if (!t.verdict.ok()) {
      if (!hung(t.verdict)) t = detail::shrink(steps, *drawn, t, plan);
      fixture = record_failure(s, t, seed, steps.one_call_shows_it);
      if (plan.say) plan.say(failure_text(s, k, seed, t, fixture.str(), redraw_line(plan, steps.check, k)));
    }
    s.add("case " + std::to_string(k) + " (seed " + std::to_string(seed) + ")", t.verdict, fixture);
    if (!t.verdict.ok() && !plan.redraw.empty())
      s.rows.back().message += "\n  drawn case again: " + redraw_line(plan, steps.check, k);
    if (plan.say && progress.due())
      plan.say("ctxscore: " + who.name + " " + steps.check + ": " + std::to_string(s.stats.cases) + " of " + std::to_string(mine) +
               " cases, " + std::to_string(s.stats.failures) + " failing\n");
    if (plan.max_failures > 0 && s.stats.failures >= plan.max_failures) {
      if (k + step < end)
        s.stopped = "stopped at failing case " + std::to_string(s.stats.failures) + " (--max-failures " +
                    std::to_string(plan.max_failures) + ")";
      s.min_cases = 0;  // a failure decides the check: the floor is for passing runs
      break;
    }
  }
  if (s.stopped.empty() && stop_signal()) s.stopped = stop_reason(plan.budget, s.stats.cases);
  if (s.stats.failures == 0 && !stop_signal()) {
    judge_floors(s, plan, steps.check);
    if (steps.finish) steps.finish(s);
  }
  s.classes = coverage.counts();
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

// A check's campaign over backend `b`.
template <class T>
Suite run_campaign(Backend& b, const CampaignPlan& plan, const CampaignSteps<T>& steps, const std::string& oracle) {
  return run_campaign(Subject{b.name(), b.toolchain()}, plan, steps, oracle);
}

}  // namespace ctxscore::harness
