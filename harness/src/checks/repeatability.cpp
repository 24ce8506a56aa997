// repeatability (CONTRACT.md §5): the same call three times gives the first
// call's bits each time, in every way of passing out.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  const CaseSource source(checks::limits_of(b, o), o.campaign.seed, o.compile_keys);
  CampaignSteps<checks::DrawnCase> steps;
  steps.check = "repeatability";
  steps.one_call_shows_it = false;
  steps.draw = checks::draw_cases(source, "mixed");
  steps.judge = [&b](const checks::DrawnCase& d) { return checks::judged_case(b, d, 3); };
  steps.classify = [](const checks::DrawnCase& d) { gen::classify(d.c, d.out); };
  steps.smaller = checks::smaller_drawn;
  return run_campaign(b, o.campaign, steps, oracle_name(b.oracle()));
}

}  // namespace

CheckDef repeatability_check() {
  return {"repeatability", "the same call three times gives the same bits (atomics, split reductions)", 5, {}, "", true,
          false, run};
}

}  // namespace ctxscore::harness
