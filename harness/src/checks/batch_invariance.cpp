// batch_invariance (CONTRACT.md §5): a request's rows are the same bits when
// the batch gains, loses or reorders requests, or gains ℓ ≤ 0 ones. The
// shrunk case is the first batch; the other is named in the verdict.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

struct Rebatched {
  Case c;
  Rebatching r;
  OutMode out = OutMode::given;
};

}  // namespace

Suite check_batch_invariance(Backend& b, const CheckOptions& o) {
  const gen::CaseLimits lim = checks::limits_of(b, o);
  CampaignSteps<Rebatched> steps;
  steps.check = "batch_invariance";
  steps.draw = [lim](std::uint64_t seed, int size) {
    return rc::gen::exec([lim] {
      Rebatched d;
      d.c = *gen::genCase(lim);
      d.r = *gen::genRebatching(d.c);
      d.out = *gen::genOutMode();
      return d;
    })(rc::Random(seed), size);
  };
  steps.judge = [&b](const Rebatched& d) {
    Verdict v = judge_rebatched(b, d.c, d.r, d.out);
    if (!v.invariance.empty()) v.invariance += "; the other batch: " + d.r.str();
    JudgeOptions opts;
    opts.out = d.out;
    return Trial{v, replay_flags(b, opts)};
  };
  steps.classify = [](const Rebatched& d) {
    gen::classify(d.c, d.out);
    gen::count_class("the batch " + d.r.how, true);
    const auto chunk = [](const Case& x) {
      return launch_geometry(x.batch(), x.max_seq_len, x.world, x.heads, x.query_len).chunk;
    };
    gen::count_class("the chunk changes with the batch", chunk(d.c) != chunk(d.r.batch));
  };
  CampaignPlan plan = o.campaign;
  plan.floors = {{"the batch gains requests", 0.08},
                 {"the batch loses requests", 0.08},
                 {"the batch is reordered", 0.08},
                 {"the batch gains requests of length <= 0", 0.08}};
  return run_campaign(b, plan, steps, oracle_name(b.oracle()));
}

}  // namespace ctxscore::harness
