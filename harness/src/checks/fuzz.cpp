// fuzz: random cases against the backend's oracle.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {
constexpr const char* kAllNegativeRow = "a written row whose qualifying scores are all negative";
}  // namespace

Suite check_fuzz(Backend& b, const CheckOptions& o) {
  const CaseSource source(checks::limits_of(b, o), o.campaign.seed, o.compile_keys);
  if (source.limited() && o.campaign.print) {
    std::fprintf(stderr, "ctxscore: %zu compile keys drawn from seed %llu:\n", source.keys().size(),
                 static_cast<unsigned long long>(o.campaign.seed));
    for (const CompileKey& k : source.keys()) std::fprintf(stderr, "  %s\n", k.str().c_str());
  }
  CampaignSteps<checks::DrawnCase> steps;
  steps.check = "fuzz";
  steps.draw = checks::draw_cases(source, o.out_mode);
  steps.judge = [&b, &o](const checks::DrawnCase& d) { return checks::judged_case(b, d, o.repeat); };
  // A row whose every qualifying score is negative shows a max that starts at 0.
  const auto judge = steps.judge;
  steps.judge = [judge](const checks::DrawnCase& d) {
    Trial t = judge(d);
    gen::count_class(kAllNegativeRow, t.verdict.report.written_negative > 0);
    return t;
  };
  steps.classify = [](const checks::DrawnCase& d) { gen::classify(d.c, d.out); };
  steps.smaller = checks::smaller_drawn;
  CampaignPlan plan = o.campaign;
  // About one case in ten has one; 2% keeps a run of 100 cases from failing by chance.
  plan.floors.push_back({kAllNegativeRow, 0.02});
  return run_campaign(b, plan, steps, oracle_name(b.oracle()));
}

}  // namespace ctxscore::harness
