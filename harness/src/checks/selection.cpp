// selection (CONTRACT.md §9): the merged top-16 over every rank's scores
// selects the reference's blocks under both tie rules, near-ties exempt,
// at M3's shapes; at least half the rows must be decided (a 17th candidate
// beyond the bounds), or the check cannot tell a wrong selection.
#include <memory>
#include <sstream>

#include "drawn_case.hpp"
#include "pipeline_draw.hpp"

namespace ctxscore::harness {

Suite check_selection(Backend& b, const CheckOptions& o) {
  // M3's shapes (smaller bounds leave too few rows decided); at case size
  // small, world 2, whose rows are decided at half the bound.
  const bool small = o.size == "small";
  gen::CaseLimits lim = gen::named_limits("m3");
  lim.min_heads = lim.max_heads = 4;
  lim.min_world = lim.max_world = small ? 2 : 4;
  lim.min_query_len = 1;
  lim.max_query_len = 4;
  lim.max_work = 1 << 14;
  lim.max_batch = std::min<std::int64_t>(lim.max_batch, 3);
  lim.max_bound = std::min<std::int64_t>(lim.max_bound, small ? 1 << 13 : 1 << 14);
  struct Totals {
    std::int64_t rows = 0, near = 0, matched = 0, decided = 0;
    double worst = 1e300;
  };
  auto totals = std::make_shared<Totals>();
  CampaignSteps<checks::PipelineDraw> steps;
  steps.check = "selection";
  steps.one_call_shows_it = false;
  steps.draw = [lim](std::uint64_t seed, int size) { return checks::genPipelineDraw(lim, true)(rc::Random(seed), size); };
  steps.judge = [&b, totals](const checks::PipelineDraw& d) {
    const PipelineVerdict pv = judge_pipeline(b, d.c, d.modes);
    totals->rows += pv.higher.rows;
    totals->near += pv.higher.near_ties;
    totals->decided += pv.higher.decided;
    totals->matched += pv.higher.matched;
    totals->worst = std::min(totals->worst, pv.higher.worst_margin);
    return checks::pipeline_trial(b, d, pv, !pv.higher.ok() || !pv.lower.ok());
  };
  steps.classify = [](const checks::PipelineDraw& d) { gen::classify(d.c); };
  steps.finish = [totals](Suite& s) {
    std::ostringstream line;
    line << "merged top-16 at M3 shapes: " << totals->rows << " (head, row) pairs, " << totals->matched
         << " matched the reference, " << totals->decided << " decided ("
         << (totals->rows ? 100.0 * totals->decided / totals->rows : 0) << " %), " << totals->near << " near-ties";
    s.oracle += "; " + line.str();
    if (s.stats.cases >= 20 && 2 * totals->decided < totals->rows)
      s.coverage = "coverage floor not met: " + line.str() + "; at least half the rows must be decided";
  };
  return run_campaign(b, o.campaign, steps, oracle_name(Oracle::reference));
}

}  // namespace ctxscore::harness
