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

struct CheckEntry {
  std::string name, claim;
  int share_of_cases;  // per 20 of fuzz's cases
};

const std::vector<CheckEntry>& entries() {
  static const std::vector<CheckEntry> e = {
      {"fuzz", "random cases within the bound of the exact scores, every way of passing out, each call made twice", 20},
      {"repeatability", "the same call three times gives the same bits (atomics, split reductions)", 5},
      {"batch_invariance", "a request's rows are bitwise the same in another batch (batch-size dependent paths)", 10},
      {"shard_columns", "each rank's columns are bitwise the world-1 columns of their blocks (rank-dependent rounding)", 5},
      {"selection", "the merged top-16 over every rank is the reference's selection, under both tie rules", 3},
      {"capture", "a graph recorded on a dummy batch replays later batches right, bitwise as plain calls", 2},
      {"refusals", "a call breaking one clause of the contract's validation is refused before anything is written", 2},
      {"corpus", "every corpus fixture (upstream's tests, peer suites' cases, edge classes), out given, absent, too small", 0},
      {"corpus_capture", "every corpus fixture through a recorded graph", 0},
      {"geometry", "the launch geometry the port reports is the contract's", 0},
      {"large_offsets", "a cache past 2^31 elements, out strides past 2^31 elements, a query row past 2^31 bytes", 0},
      {"large_batches", "batches of 65535 and 70000 requests: request ids past 2^15 and 2^16 (16-bit ids)", 0},
  };
  return e;
}

std::int64_t elapsed_since(std::chrono::steady_clock::time_point t0) {
  return static_cast<std::int64_t>(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

const std::vector<std::string>& check_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const CheckEntry& e : entries()) n.push_back(e.name);
    return n;
  }();
  return names;
}

std::string check_claim(const std::string& name) {
  for (const CheckEntry& e : entries())
    if (e.name == name) return e.claim;
  std::string known;
  for (const std::string& n : check_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("no check \"" + printable(name) + "\"; the checks are " + known);
}

Report run_gate(Backend& b, const GatePlan& plan) {
  const std::vector<std::string> names = plan.checks.empty() ? check_names() : plan.checks;
  for (const std::string& n : names) check_claim(n);  // throws on an unknown name
  for (const std::string& n : plan.required) check_claim(n);
  const bool named = !plan.checks.empty();
  const std::string size = plan.drawn.size.empty() ? b.case_size() : plan.drawn.size;
  const auto t0 = std::chrono::steady_clock::now();
  // Why a check will not run on this backend, asked of the first lane's
  // backend before any lane starts: a time budget is shared among the checks
  // that will run, and no lane may talk to another's backend.
  std::string capture_missing;
  const bool asks_capture = std::find(names.begin(), names.end(), "corpus_capture") != names.end() ||
                            (plan.time_budget > 0 && std::find(names.begin(), names.end(), "capture") != names.end());
  if (asks_capture) {
    try {
      capture_missing = capture_absence(b);
    } catch (const BackendError&) {
      capture_missing.clear();  // the capture check reports the raising probe as its failure
    }
  }
  const auto left_out = [&](const std::string& name) -> std::string {
    if (name == "large_offsets" && size == "small" && !named)
      return "left out at case size small (a CPU port's); name the check to run it (it needs about 14 GiB)";
    if (name == "capture" || name == "corpus_capture") return capture_missing;
    if (name == "refusals") return b.refusals_absence();
    if (name == "geometry") {
      PortBackendApi* port = as_port(b);
      return port && port->supports("geometry") ? "" : "no geometry";
    }
    return "";
  };
  std::vector<std::string> absent(names.size());
  std::vector<bool> runs(names.size(), true);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "large_offsets" || names[i] == "corpus_capture") absent[i] = left_out(names[i]);
    if (plan.time_budget > 0) runs[i] = left_out(names[i]).empty();
  }
  const std::size_t lanes = plan.another ? std::clamp<std::size_t>(plan.lanes, 1, names.size()) : 1;

  // One check over one lane's backend. A check is abandoned (its budget
  // spent at once) when one before it in order fails under fail fast or
  // raises: the serial gate would not have run it.
  std::unique_ptr<std::atomic<bool>[]> abandoned(new std::atomic<bool>[names.size()]);
  for (std::size_t i = 0; i < names.size(); ++i) abandoned[i] = false;
  const auto run_one = [&](Backend& lb, std::size_t i, double share) {
    const std::string& name = names[i];
    const TimeBudget budget(share, &abandoned[i]);
    CheckOptions o = plan.drawn;
    o.size = size;
    o.campaign.budget = &budget;
    const auto& entry = *std::find_if(entries().begin(), entries().end(), [&](const CheckEntry& e) { return e.name == name; });
    if (entry.share_of_cases > 0 && name != "fuzz")
      o.campaign.cases = std::max<std::int64_t>(1, plan.drawn.campaign.cases * entry.share_of_cases / 20);
    Suite s;
    const PhaseSeconds before = phase_seconds();
    if (!absent[i].empty()) {
      s = suite_for(name, lb, name == "corpus_capture" ? "the fixtures' expectations" : oracle_name(lb.oracle()));
      s.not_run = absent[i];
    } else if (name == "fuzz") {
      s = check_fuzz(lb, o);
    } else if (name == "repeatability") {
      s = check_repeatability(lb, o);
    } else if (name == "batch_invariance") {
      s = check_batch_invariance(lb, o);
    } else if (name == "shard_columns") {
      s = check_shard_columns(lb, o);
    } else if (name == "selection") {
      s = check_selection(lb, o);
    } else if (name == "capture") {
      s = check_capture(lb, o);
    } else if (name == "refusals") {
      s = check_refusals(lb, o);
    } else if (name == "corpus" || name == "corpus_capture") {
      CorpusOptions co;
      co.capture = name == "corpus_capture";
      co.modes = co.capture ? std::vector<OutMode>{OutMode::given}
                            : std::vector<OutMode>{OutMode::given, OutMode::absent, OutMode::too_small};
      co.budget = o.campaign.budget;
      if (o.campaign.min_cases >= 0)
        co.min_cases = std::min<std::int64_t>(o.campaign.min_cases, static_cast<std::int64_t>(plan.corpus.size() * co.modes.size()));
      s = check_corpus(lb, plan.corpus, co);
    } else if (name == "geometry") {
      s = check_geometry(lb, plan.geometry_points, plan.drawn.campaign.seed);
    } else if (name == "large_batches") {
      s = check_large_batches(lb, {}, o.campaign.budget);
    } else {
      s = check_large_offsets(lb, {}, o.campaign.budget);
    }
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
      s = suite_for(names[i], b, oracle_name(b.oracle()));
      s.not_run = !first_failing.empty() ? "the gate stopped at the first failing check, " + first_failing + " (fail fast)"
                                         : "the run was interrupted before it";
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
    static const char* const kClaimsBeyondScores[] = {"repeatability", "batch_invariance", "shard_columns", "selection"};
    if (std::find(std::begin(kClaimsBeyondScores), std::end(kClaimsBeyondScores), s.name) != std::end(kClaimsBeyondScores) &&
        off_the_oracle(s))
      if (const auto owner = std::find_if(report.suites.begin(), report.suites.end(), off_the_oracle); owner != report.suites.end())
        s.same_mismatch_as = owner->name;
    if (plan.drawn.campaign.print)
      std::fprintf(stderr, "ctxscore gate: %s %s (%lld s in all)\n", b.name().c_str(), s.summary().c_str(),
                   static_cast<long long>(elapsed_since(t0)));
    report.suites.push_back(std::move(s));
  }
  for (std::size_t j = 0; j < names.size(); ++j) abandoned[j] = true;  // after an error, the lanes stop at their next case
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  report.interrupted_by = stop_signal();
  return report;
}

}  // namespace ctxscore::harness
