#include "ctxscore/harness/campaign.hpp"

#include "ctxscore/contents.hpp"

#include <signal.h>
#include <unistd.h>

namespace ctxscore::harness {

std::uint64_t case_seed(std::uint64_t run_seed, const std::string& check, std::int64_t k) {
  return splitmix(splitmix(run_seed) ^ splitmix(fnv1a(check) + static_cast<std::uint64_t>(k)));
}

Suite suite_for(const std::string& check, Backend& b, const std::string& oracle) {
  Suite s;
  s.name = check;
  s.backend = b.name();
  s.toolchain = b.toolchain();
  s.oracle = oracle;
  return s;
}

std::string stop_reason(const TimeBudget* budget, std::int64_t judged) {
  if (const int sig = stop_signal())
    return std::string("interrupted by ") +
           (sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : sig == SIGQUIT ? "SIGQUIT" : "a signal") + " after " +
           std::to_string(judged) + " judged";
  if (budget && budget->spent()) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3g", budget->seconds());
    return std::string("time budget of ") + seconds + " s spent after " + std::to_string(judged) + " judged";
  }
  return "";
}

const Floor* stratum_of(const std::vector<Floor>& floors, std::int64_t k) {
  // frac(k·φ) in 64-bit fixed point: k times 2^64/φ, modulo 2^64.
  const double u = static_cast<double>(static_cast<std::uint64_t>(k) * 0x9E3779B97F4A7C15ull) * 0x1p-64;
  double edge = 0;
  for (const Floor& f : floors)
    if (u < (edge += f.share)) return &f;
  return nullptr;
}

void StratumTally::add(std::int64_t k, bool drawn_in, bool in_class) {
  if (!drawn_in) {
    ++unreachable;
    return;
  }
  ++drawn;
  if (in_class) ++held;
  else if (first_miss < 0) first_miss = k;
}

void judge_floors(Suite& s, const CampaignPlan& plan, const std::vector<StratumTally>& tallies, const std::string& check) {
  for (std::size_t i = 0; i < plan.floors.size(); ++i) {
    const Floor& f = plan.floors[i];
    const StratumTally& t = tallies[i];
    if (t.unreachable > 0 && t.drawn == 0)
      s.oracle += "; no compile key of this run can hold \"" + f.claim + "\" (" + std::to_string(t.unreachable) +
                  " cases of its stratum drawn at random instead)";
    if (t.held == t.drawn) continue;
    s.coverage += (s.coverage.empty() ? "" : "; ") + std::string("coverage floor not met, a shortfall of the harness's case source, "
                  "not of the backend: \"") + f.claim + "\" held in " + std::to_string(t.held) + " of the " +
                  std::to_string(t.drawn) + " cases drawn to hold it; the first to miss is case " +
                  std::to_string(t.first_miss) + " of seed " + std::to_string(plan.seed);
    if (const std::string again = redraw_line(plan, check, t.first_miss); !again.empty())
      s.coverage += "; draw it again: " + again;
  }
}

FailureFile record_failure(const Suite& s, const Trial& t, std::uint64_t seed, Backend& b, bool one_call_shows_it) {
  return write_failure_fixture(t.verdict.spec, FailureRecord{s.name, seed, t.verdict.out, !hung(t.verdict), b.toolchain(), !one_call_shows_it},
                               t.replay_flags);
}

bool hung(const Verdict& v) { return v.fault == Fault::hung; }

std::string redraw_line(const CampaignPlan& plan, const std::string& check, std::int64_t k) {
  if (plan.redraw.empty()) return "";
  return plan.redraw + " --check " + check + " --seed " + std::to_string(plan.seed) + " --only-case " + std::to_string(k);
}

std::string failure_text(const Suite& s, std::int64_t k, std::uint64_t seed, const Trial& t, const std::string& fixture,
                         const std::string& again) {
  std::string text = std::string(isatty(fileno(stderr)) ? "\r" : "") + "FAIL " + s.name + " (" + s.backend + "): case " +
                     std::to_string(k) + ", seed " + std::to_string(seed) +
                     (hung(t.verdict) ? " (a hung port: not shrunk, each step would cost a timeout)" : "") + "\n  " +
                     (hung(t.verdict) ? "case" : "shrunk") + ": " + printable(t.verdict.spec.str()) + "\n  " +
                     printable(t.verdict.str()) + "\n";
  if (t.verdict.report.first) text += "  " + printable(explain_first_mismatch(t.verdict)) + "\n";
  text += "  fixture: " + fixture + "\n";
  if (!again.empty()) text += "  drawn case again: " + again + "\n";
  return text;
}

}  // namespace ctxscore::harness
