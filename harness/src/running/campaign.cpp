#include "ctxscore/harness/campaign.hpp"

#include "ctxscore/contents.hpp"

#include <signal.h>
#include <stdexcept>
#include <unistd.h>

namespace ctxscore::harness {

std::uint64_t case_seed(std::uint64_t run_seed, const std::string& check, std::int64_t k) {
  return splitmix(splitmix(run_seed) ^ splitmix(fnv1a(check) + static_cast<std::uint64_t>(k)));
}

Suite suite_for(const std::string& check, const Subject& who, const std::string& oracle) {
  Suite s;
  s.name = check;
  s.backend = who.name;
  s.toolchain = who.toolchain;
  s.oracle = oracle;
  return s;
}

Suite suite_for(const std::string& check, Backend& b, const std::string& oracle) {
  return suite_for(check, Subject{b.name(), b.toolchain()}, oracle);
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

void check_floor_shares(const std::vector<Floor>& floors) {
  double sum = 0;
  for (const Floor& f : floors) {
    if (!(f.share > 0 && f.share <= 1))
      throw std::invalid_argument("coverage floor \"" + f.claim + "\": share " + std::to_string(f.share) + ", expected one in (0, 1]");
    sum += f.share;
  }
  if (sum > 1 + 1e-9)
    throw std::invalid_argument("coverage floors: their shares sum to " + std::to_string(sum) +
                                ", expected at most 1 (each holds a stratum of the run's cases of its own)");
}

void judge_floors(Suite& s, const CampaignPlan& plan, const std::string& check) {
  for (const StratumTally& t : s.floors) {
    if (t.unreachable > 0 && t.drawn == 0)
      s.oracle += "; no compile key of this run can hold \"" + t.claim + "\" (" + std::to_string(t.unreachable) +
                  " cases of its stratum drawn at random instead)";
    if (t.held == t.drawn) continue;
    s.coverage += (s.coverage.empty() ? "" : "; ") + std::string("coverage floor not met, a shortfall of the harness's case source, "
                  "not of the backend: \"") + t.claim + "\" held in " + std::to_string(t.held) + " of the " +
                  std::to_string(t.drawn) + " cases drawn to hold it; the first to miss is case " +
                  std::to_string(t.first_miss) + " of seed " + std::to_string(plan.seed);
    if (const std::string again = redraw_line(plan, check, t.first_miss); !again.empty())
      s.coverage += "; draw it again: " + again;
  }
}

FailureFile record_failure(const Suite& s, const Trial& t, std::uint64_t seed, bool one_call_shows_it) {
  if (t.not_a_case) {
    FailureFile none;
    none.not_written = "the failing value is not a case";
    return none;
  }
  return write_failure_fixture(t.verdict.spec, FailureRecord{s.name, seed, t.verdict.out, !hung(t.verdict), s.toolchain, !one_call_shows_it},
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
                     (hung(t.verdict) ? "case" : "shrunk") + ": " + printable(t.not_a_case ? *t.not_a_case : t.verdict.spec.str()) + "\n  " +
                     printable(t.verdict.str()) + "\n";
  if (t.verdict.report.first) text += "  " + printable(explain_first_mismatch(t.verdict)) + "\n";
  text += "  fixture: " + fixture + "\n";
  if (!again.empty()) text += "  drawn case again: " + again + "\n";
  return text;
}

}  // namespace ctxscore::harness
