// shard_columns (CONTRACT.md §9): each rank's written column j equals,
// bitwise, what the same scorer writes for block j·world + r at world 1, so
// that the consumer's merge of the ranks is exact.
#include "drawn_case.hpp"
#include "pipeline_draw.hpp"

namespace ctxscore::harness {

namespace {

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  gen::CaseLimits lim = checks::limits_of(b, o);
  lim.max_world = std::max<std::int64_t>(lim.max_world, 8);
  lim.max_work = std::min<std::int64_t>(lim.max_work, 1 << 13);
  CampaignSteps<checks::PipelineDraw> steps;
  steps.check = "shard_columns";
  steps.one_call_shows_it = false;
  steps.draw = [lim](std::uint64_t seed, int size) { return checks::genPipelineDraw(lim, false)(rc::Random(seed), size); };
  steps.judge = [&b](const checks::PipelineDraw& d) {
    const PipelineVerdict pv = judge_pipeline(b, d.c, d.modes);
    return checks::pipeline_trial(b, d, pv, !pv.shard_mismatch.empty(), Fault::shard_mismatch);
  };
  steps.classify = [](const checks::PipelineDraw& d) { gen::classify(d.c); };
  steps.smaller = [](const checks::PipelineDraw& d) {
    std::vector<checks::PipelineDraw> out;
    for (Case& c : smaller_cases(d.c))
      out.push_back({c, std::vector<OutMode>(static_cast<std::size_t>(c.world), OutMode::given)});
    return out;
  };
  return run_campaign(b, o.campaign, steps, oracle_name(Oracle::reference));
}

}  // namespace

CheckDef shard_columns_check() {
  return {"shard_columns",
          "each rank's columns are bitwise the world-1 columns of their blocks (rank-dependent rounding)",
          5, {}, oracle_name(Oracle::reference), true, false, run};
}

}  // namespace ctxscore::harness
