// The gate: every check against one backend, taken in order by one lane or
// several side by side (each lane with its own instance of the backend),
// reported in order; the time budget shared so that each check that will
// run gets a fair part of what the ones before left.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/port.hpp"

namespace ctxscore::harness {

namespace {

std::int64_t elapsed_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::int64_t>(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

Report run_gate(Backend& b, const GatePlan& plan) {
  const std::vector<std::string> names = plan.checks.empty() ? check_names() : plan.checks;
  std::vector<const CheckDef*> defs;
  for (const std::string& n : names) defs.push_back(&check_named(n));  // throws on an unknown name
  for (const std::string& n : plan.required) check_named(n);
  const bool named = !plan.checks.empty();
  const std::string size = plan.drawn.size.empty() ? b.case_size() : plan.drawn.size;
  const auto t0 = std::chrono::steady_clock::now();
  // Why a check will not run, asked of the first lane's backend before any
  // lane starts: a time budget is shared among the checks that will run,
  // and no lane may talk to another's backend.
  std::vector<std::string> absent(names.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    absent[i] = defs[i]->left_out_at_small && size == "small" && !named
                    ? "left out at case size small (a CPU port's); name the check to run it (it needs about 14 GiB)"
                    : unmet_need(*defs[i], b);
  std::vector<bool> runs(names.size());
  for (std::size_t i = 0; i < names.size(); ++i) runs[i] = absent[i].empty();
  const std::size_t lanes = plan.another ? std::clamp<std::size_t>(plan.lanes, 1, names.size()) : 1;

  // One check over one lane's backend. A check is abandoned (its budget
  // spent at once) when one before it in order fails under fail fast or
  // raises: the serial gate would not have run it.
  std::unique_ptr<std::atomic<bool>[]> abandoned(new std::atomic<bool>[names.size()]);
  for (std::size_t i = 0; i < names.size(); ++i) abandoned[i] = false;
  const auto run_one = [&](Backend& lb, std::size_t i, double share) {
    const CheckDef& def = *defs[i];
    const TimeBudget budget(share, &abandoned[i]);
    CheckContext x;
    x.drawn = plan.drawn;
    x.drawn.size = size;
    x.drawn.campaign.budget = &budget;
    if (def.share_of_cases > 0 && def.name != "fuzz")
      x.drawn.campaign.cases = std::max<std::int64_t>(1, plan.drawn.campaign.cases * def.share_of_cases / 20);
    x.corpus = plan.corpus;
    x.geometry_points = plan.geometry_points;
    const PhaseSeconds before = phase_seconds();
    Suite s = absent[i].empty() ? def.run(lb, x) : not_run_suite(def, lb, absent[i]);
    s.phases = phase_difference(phase_seconds(), before);
    return s;
  };

  // The lanes take the checks in order; each finished check is kept in its
  // place, and this thread reports them in order as they become known, so
  // that the report is the serial gate's whatever the lanes.
  std::mutex m;
  std::condition_variable finished_one;
  std::size_t next = 0;
  std::size_t cut_after = names.size();  // the first check, in order, that failed under fail fast or raised
  std::vector<Suite> suites(names.size());
  std::vector<bool> started(names.size(), false), finished(names.size(), false);
  std::vector<std::exception_ptr> raised(names.size());
  const auto lane = [&](std::size_t k) {
    std::unique_ptr<Backend> own;
    for (;;) {
      std::size_t i = 0;
      double share = 0;
      {
        const std::lock_guard<std::mutex> lock(m);
        if (next == names.size()) return;
        i = next++;
        started[i] = i < cut_after && !stop_signal();
        if (started[i] && plan.time_budget > 0) {
          // What is left, shared among the checks still to run, as many at a time as there are lanes.
          const double left = std::max(plan.time_budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1e-3);
          const auto to_run = static_cast<double>(std::max<std::ptrdiff_t>(std::count(runs.begin() + static_cast<std::ptrdiff_t>(i), runs.end(), true), 1));
          share = std::min(left, left * std::min(static_cast<double>(lanes), to_run) / to_run);
        }
        if (!started[i]) {
          finished[i] = true;
          finished_one.notify_all();
          continue;
        }
      }
      Suite s;
      std::exception_ptr error;
      try {
        if (k > 0 && !own) own = plan.another();
        s = run_one(k > 0 ? *own : b, i, share);
      } catch (...) {
        error = std::current_exception();
      }
      {
        const std::lock_guard<std::mutex> lock(m);
        if ((error || (plan.fail_fast && !s.ok() && s.not_run.empty())) && i < cut_after) {
          cut_after = i;
          for (std::size_t j = i + 1; j < names.size(); ++j) abandoned[j] = true;
        }
        suites[i] = std::move(s);
        raised[i] = error;
        finished[i] = true;
      }
      finished_one.notify_all();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t k = 0; k < lanes; ++k) threads.emplace_back(lane, k);

  Report report;
  std::exception_ptr error;
  std::string first_failing;
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::unique_lock<std::mutex> lock(m);
    finished_one.wait(lock, [&] { return finished[i]; });
    if (raised[i]) {
      error = raised[i];
      break;
    }
    Suite s = std::move(suites[i]);
    const bool ran = started[i];
    lock.unlock();
    if (!ran || !first_failing.empty()) {
      const PhaseSeconds spent = s.phases;
      s = not_run_suite(*defs[i], b, !first_failing.empty() ? "the gate stopped at the first failing check, " + first_failing + " (fail fast)"
                                                            : "the run was interrupted before it");
      s.phases = spent;
    }
    if (plan.fail_fast && first_failing.empty() && !s.ok() && s.not_run.empty()) first_failing = s.name;
    s.required = std::find(plan.required.begin(), plan.required.end(), s.name) != plan.required.end();
    // A check whose claim is about bits or selections (not the scores
    // themselves) that failed only on scores off the oracle met the root
    // cause an earlier check owns: it says so, and is still a failure.
    const auto off_the_oracle = [](const Suite& x) {
      return x.stats.failures > 0 &&
             std::all_of(x.rows.begin(), x.rows.end(), [](const Row& r) { return r.ok || r.off_the_oracle; });
    };
    if (defs[i]->claims_beyond_scores && off_the_oracle(s))
      if (const auto owner = std::find_if(report.suites.begin(), report.suites.end(), off_the_oracle); owner != report.suites.end())
        s.same_mismatch_as = owner->name;
    if (plan.drawn.campaign.say)
      plan.drawn.campaign.say("ctxscore gate: " + b.name() + " " + s.summary() + " (" + std::to_string(elapsed_since(t0)) + " s in all)\n");
    report.suites.push_back(std::move(s));
  }
  for (std::size_t j = 0; j < names.size(); ++j) abandoned[j] = true;  // after an error, the lanes stop at their next case
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  report.interrupted_by = stop_signal();
  return report;
}

}  // namespace ctxscore::harness
