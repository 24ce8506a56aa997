// selection (CONTRACT.md §9): the merged top-16 over every rank's scores
// selects the reference's blocks under both tie rules, near-ties exempt,
// at M3's shapes. Half the cases are drawn so that at least half their rows
// are decided (a 17th candidate beyond the bounds), or the check could not
// tell a wrong selection.
#include <memory>
#include <sstream>

#include "drawn_case.hpp"
#include "pipeline_draw.hpp"

namespace ctxscore::harness {

namespace {

// M3's shapes (smaller bounds leave too few rows decided); at case size
// small, world 2, whose rows are decided at half the bound.
gen::CaseLimits selection_limits(const std::string& size) {
  const bool small = size == "small";
  gen::CaseLimits lim = gen::named_limits("m3");
  lim.min_heads = lim.max_heads = 4;
  lim.min_world = lim.max_world = small ? 2 : 4;
  lim.min_query_len = 1;
  lim.max_query_len = 4;
  lim.max_work = 1 << 14;
  lim.max_batch = std::min<std::int64_t>(lim.max_batch, 3);
  lim.max_bound = std::min<std::int64_t>(lim.max_bound, small ? 1 << 13 : 1 << 14);
  return lim;
}

// A stratum case is drawn again from the next seeds until the reference
// decides most of its rows; 16 misses in a row leave it to the floor.
rc::Shrinkable<checks::PipelineDraw> draw_most_rows_decided(const gen::CaseLimits& lim, std::uint64_t seed, int size) {
  for (std::uint64_t attempt = 0;; ++attempt) {
    auto d = checks::genPipelineDraw(lim, true)(rc::Random(seed + attempt * 0x9E3779B97F4A7C15ull), size);
    if (attempt == 15 || rows_decided(d.value().c).most()) return d;
  }
}

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  const gen::CaseLimits lim = selection_limits(o.size);
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
    gen::count_class(kMostRowsDecidedFloor.claim, pv.error.empty() && RowsDecided{pv.higher.rows, pv.higher.decided}.most());
    return checks::pipeline_trial(b, d, pv, !pv.higher.ok() || !pv.lower.ok(), Fault::selection);
  };
  steps.draw_in = [lim](std::uint64_t seed, int size, const std::string&) {
    return std::optional<rc::Shrinkable<checks::PipelineDraw>>(draw_most_rows_decided(lim, seed, size));
  };
  steps.classify = [](const checks::PipelineDraw& d) { gen::classify(d.c); };
  steps.finish = [totals](Suite& s) {
    std::ostringstream line;
    line << "merged top-16 at M3 shapes: " << totals->rows << " (head, row) pairs, " << totals->matched
         << " matched the reference, " << totals->decided << " decided ("
         << (totals->rows ? 100.0 * totals->decided / totals->rows : 0) << " %), " << totals->near << " near-ties";
    s.oracle += "; " + line.str();
  };
  CampaignPlan plan = o.campaign;
  plan.floors = {kMostRowsDecidedFloor};
  return run_campaign(b, plan, steps, oracle_name(Oracle::reference));
}

}  // namespace

CheckDef selection_check() {
  return {"selection", "the merged top-16 over every rank is the reference's selection, under both tie rules", 3, {},
          oracle_name(Oracle::reference), true, false, run};
}

Case selection_stratum_case(const std::string& size, std::uint64_t case_seed, int rc_size) {
  return draw_most_rows_decided(selection_limits(size), case_seed, rc_size).value().c;
}

}  // namespace ctxscore::harness
