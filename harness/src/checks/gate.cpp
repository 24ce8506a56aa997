// The gate: every check, in order, against one backend, the time budget
// shared so that each check that will run gets a fair part of what the
// ones before left.
#include <algorithm>
#include <chrono>
#include <stdexcept>

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
  Report report;
  const auto t0 = std::chrono::steady_clock::now();
  std::string capture_missing;
  bool capture_probed = false;
  const auto capture_absent = [&]() -> const std::string& {
    if (!capture_probed) {
      capture_probed = true;
      try {
        capture_missing = capture_absence(b);
      } catch (const BackendError&) {
        capture_missing.clear();  // the capture check reports the raising probe as its failure
      }
    }
    return capture_missing;
  };
  // Why a check will not run on this backend, known before it starts, so
  // that a time budget is shared among the checks that will run.
  const auto left_out = [&](const std::string& name) -> std::string {
    if (name == "large_offsets" && size == "small" && !named)
      return "left out at case size small (a CPU port's); name the check to run it (it needs about 14 GiB)";
    if (name == "capture" || name == "corpus_capture") return capture_absent();
    if (name == "refusals") return b.refusals_absence();
    if (name == "geometry") {
      PortBackendApi* port = as_port(b);
      return port && port->supports("geometry") ? "" : "no geometry";
    }
    return "";
  };
  std::vector<bool> runs;  // asked only where a budget is shared: the probes are not free
  if (plan.time_budget > 0)
    for (const std::string& n : names) runs.push_back(left_out(n).empty());
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    double share = 0;
    if (plan.time_budget > 0) {
      const double left = plan.time_budget - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const auto to_run = std::count(runs.begin() + static_cast<std::ptrdiff_t>(i), runs.end(), true);
      share = std::max(left, 1e-3) / static_cast<double>(std::max<std::ptrdiff_t>(to_run, 1));
    }
    const TimeBudget budget(share);
    CheckOptions o = plan.drawn;
    o.size = size;
    o.campaign.budget = plan.time_budget > 0 ? &budget : nullptr;
    const auto& entry = *std::find_if(entries().begin(), entries().end(), [&](const CheckEntry& e) { return e.name == name; });
    if (entry.share_of_cases > 0 && name != "fuzz")
      o.campaign.cases = std::max<std::int64_t>(1, plan.drawn.campaign.cases * entry.share_of_cases / 20);
    Suite s;
    const PhaseSeconds before = phase_seconds();
    const auto failed = std::find_if(report.suites.begin(), report.suites.end(), [](const Suite& x) { return !x.ok(); });
    if (stop_signal()) {
      s = suite_for(name, b, oracle_name(b.oracle()));
      s.not_run = "the run was interrupted before it";
    } else if (plan.fail_fast && failed != report.suites.end()) {
      s = suite_for(name, b, oracle_name(b.oracle()));
      s.not_run = "the gate stopped at the first failing check, " + failed->name + " (fail fast)";
    } else if (name == "fuzz") {
      s = check_fuzz(b, o);
    } else if (name == "repeatability") {
      s = check_repeatability(b, o);
    } else if (name == "batch_invariance") {
      s = check_batch_invariance(b, o);
    } else if (name == "shard_columns") {
      s = check_shard_columns(b, o);
    } else if (name == "selection") {
      s = check_selection(b, o);
    } else if (name == "capture") {
      s = check_capture(b, o);
    } else if (name == "refusals") {
      s = check_refusals(b, o);
    } else if (name == "corpus" || name == "corpus_capture") {
      CorpusOptions co;
      co.capture = name == "corpus_capture";
      co.modes = co.capture ? std::vector<OutMode>{OutMode::given}
                            : std::vector<OutMode>{OutMode::given, OutMode::absent, OutMode::too_small};
      co.budget = o.campaign.budget;
      if (o.campaign.min_cases >= 0)
        co.min_cases = std::min<std::int64_t>(o.campaign.min_cases, static_cast<std::int64_t>(plan.corpus.size() * co.modes.size()));
      if (co.capture && !left_out(name).empty()) {
        s = suite_for(name, b, "the fixtures' expectations");
        s.not_run = left_out(name);
      } else {
        s = check_corpus(b, plan.corpus, co);
      }
    } else if (name == "geometry") {
      s = check_geometry(b, plan.geometry_points, plan.drawn.campaign.seed);
    } else if (name == "large_batches") {
      s = check_large_batches(b, {}, o.campaign.budget);
    } else {
      if (const std::string why = left_out(name); !why.empty()) {
        s = suite_for(name, b, oracle_name(b.oracle()));
        s.not_run = why;
      } else {
        s = check_large_offsets(b, {}, o.campaign.budget);
      }
    }
    s.phases = phase_difference(phase_seconds(), before);
    s.required = std::find(plan.required.begin(), plan.required.end(), name) != plan.required.end();
    // A check whose claim is about bits or selections (not the scores
    // themselves) that failed only on scores off the oracle met the root
    // cause an earlier check owns: it says so, and is still a failure.
    const auto off_the_oracle = [](const Suite& x) {
      return x.stats.failures > 0 &&
             std::all_of(x.rows.begin(), x.rows.end(), [](const Row& r) { return r.ok || r.off_the_oracle; });
    };
    static const char* const kClaimsBeyondScores[] = {"repeatability", "batch_invariance", "shard_columns", "selection"};
    if (std::find(std::begin(kClaimsBeyondScores), std::end(kClaimsBeyondScores), name) != std::end(kClaimsBeyondScores) &&
        off_the_oracle(s))
      if (const auto owner = std::find_if(report.suites.begin(), report.suites.end(), off_the_oracle); owner != report.suites.end())
        s.same_mismatch_as = owner->name;
    if (plan.drawn.campaign.print)
      std::fprintf(stderr, "ctxscore gate: %s %s (%lld s in all)\n", b.name().c_str(), s.summary().c_str(),
                   static_cast<long long>(elapsed_since(t0)));
    report.suites.push_back(std::move(s));
  }
  report.interrupted_by = stop_signal();
  return report;
}

}  // namespace ctxscore::harness
