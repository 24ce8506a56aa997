// fuzz: random cases against the backend's oracle.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  const CaseSource source(checks::limits_of(b, o), o.campaign.seed, o.compile_keys);
  CampaignSteps<checks::DrawnCase> steps;
  steps.check = "fuzz";
  steps.draw = checks::draw_cases(source, o.out_mode);
  steps.draw_in = [&source, mode = o.out_mode](std::uint64_t seed, int size,
                                                const std::string&) -> std::optional<rc::Shrinkable<checks::DrawnCase>> {
    std::optional<rc::Shrinkable<Case>> c = source.draw_negative_row(seed, size);
    if (!c) return std::nullopt;
    return checks::with_out_mode(std::move(*c), mode, seed);
  };
  steps.judge = [&b, &o](const checks::DrawnCase& d) { return checks::judged_case(b, d, o.repeat); };
  const auto judge = steps.judge;
  steps.judge = [judge](const checks::DrawnCase& d) {
    Trial t = judge(d);
    gen::count_class(kAllNegativeRowFloor.claim, t.verdict.report.written_negative > 0);
    return t;
  };
  steps.classify = [](const checks::DrawnCase& d) { gen::classify(d.c, d.out); };
  steps.smaller = checks::smaller_drawn;
  CampaignPlan plan = o.campaign;
  plan.floors.push_back(kAllNegativeRowFloor);
  Suite s = run_campaign(b, plan, steps, oracle_name(b.oracle()));
  for (const CompileKey& k : source.keys()) s.compile_keys.push_back(k.str());
  return s;
}

}  // namespace

CheckDef fuzz_check() {
  return {"fuzz", "random cases within the bound of the exact scores, every way of passing out, each call made twice",
          20, {}, "", false, false, run};
}

}  // namespace ctxscore::harness
