// refusals (CONTRACT.md §7): each drawn case's call is scored, and the same
// call with one clause broken, for every clause a call can break, is
// refused with every storage bitwise unchanged and no buffer returned.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

constexpr const char* kOracle = "the contract's validation clauses";

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
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
  return run_campaign(b, o.campaign, steps, kOracle);
}

}  // namespace

CheckDef refusals_check() {
  return {"refusals", "a call breaking one clause of the contract's validation is refused before anything is written", 2,
          {Need::refusals}, kOracle, false, false, run};
}

}  // namespace ctxscore::harness
