// refusals (CONTRACT.md §7): each drawn case's call is scored, and the same
// call with one clause broken, for every clause a call can break, is
// refused with every storage bitwise unchanged and no buffer returned.
#include "drawn_case.hpp"

namespace ctxscore::harness {

Suite check_refusals(Backend& b, const CheckOptions& o) {
  if (const std::string why = b.refusals_absence(); !why.empty()) {
    Suite s = suite_for("refusals", b, "the contract's validation clauses");
    s.not_run = why;
    return s;
  }
  const CaseSource source(checks::limits_of(b, o), o.campaign.seed, o.compile_keys);
  CampaignSteps<checks::DrawnCase> steps;
  steps.check = "refusals";
  steps.draw = checks::draw_cases(source, "given");
  steps.judge = [&b](const checks::DrawnCase& d) {
    JudgeOptions jo;
    jo.write_failure = false;
    jo.refusals = true;
    return Trial{run_and_judge(b, d.c, jo), replay_flags(b, jo)};
  };
  steps.classify = [](const checks::DrawnCase& d) { gen::classify(d.c, d.out); };
  steps.smaller = checks::smaller_drawn;
  return run_campaign(b, o.campaign, steps, "the contract's validation clauses");
}

}  // namespace ctxscore::harness
