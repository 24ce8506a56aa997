// large_batches: batches whose request ids pass 2^15 and 2^16, where a
// kernel that packs a request id into 16 bits (or puts the batch on a grid
// dimension capped at 65535) reads one request under another's id. The
// cases are the registry's `batch` family; short lengths keep the exact
// scores cheap. A failure writes its fixture, unshrunk (the batch is the
// bug), and ends the check.
#include <algorithm>
#include <chrono>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "named_case.hpp"

namespace ctxscore::harness {

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const std::vector<std::string>& only = x.only;
  const TimeBudget* budget = x.drawn.campaign.budget;
  Suite s = suite_for("large_batches", b, oracle_name(b.oracle()));
  const auto t0 = std::chrono::steady_clock::now();
  for (const Case& c : family_cases(CaseFamily::batch)) {
    if (!only.empty() && std::find(only.begin(), only.end(), c.name) == only.end()) continue;
    if (s.stopped = stop_reason(budget, s.stats.cases); !s.stopped.empty()) break;
    const Verdict v =
        checks::judge_named_case(s, b, c, c.name + " (" + std::to_string(c.batch()) + " requests)", "it tests no request id");
    if (!v.ok()) {  // each further case costs seconds and a fixture of tens of MB
      s.stopped = "stopped at its first failing case";
      break;
    }
  }
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

}  // namespace

CheckDef large_batches_check() {
  return {"large_batches", "batches of 65535 and 70000 requests: request ids past 2^15 and 2^16 (16-bit ids)", 0, {}, "",
          false, false, run};
}

}  // namespace ctxscore::harness
