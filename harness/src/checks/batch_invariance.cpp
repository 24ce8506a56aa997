// batch_invariance (CONTRACT.md §5): a request's rows are the same bits when
// the batch gains, loses or reorders requests, or gains ℓ ≤ 0 ones. The
// shrunk case is the first batch; the other is named in the verdict.
#include "drawn_case.hpp"

namespace ctxscore::harness {

namespace {

constexpr const char* kThe = kRebatchedClassPrefix;

struct Rebatched {
  Case c;
  Rebatching r;
  OutMode out = OutMode::given;
};

Suite run(Backend& b, const CheckContext& x) {
  const CheckOptions& o = x.drawn;
  const gen::CaseLimits lim = checks::limits_of(b, o);
  CampaignSteps<Rebatched> steps;
  steps.check = "batch_invariance";
  steps.one_call_shows_it = false;
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
  // Every case is in one stratum: the way the batch changes is drawn on purpose.
  steps.draw_in = [lim](std::uint64_t seed, int size, const std::string& claim) -> std::optional<rc::Shrinkable<Rebatched>> {
    const std::string how = claim.substr(std::string(kThe).size());
    return rc::gen::exec([lim, how] {
      Rebatched d;
      std::tie(d.c, d.r) = *gen::genRebatchedCase(lim, how);
      d.out = *gen::genOutMode();
      return d;
    })(rc::Random(seed), size);
  };
  steps.classify = [](const Rebatched& d) {
    gen::classify(d.c, d.out);
    gen::count_class(kThe + d.r.how, gen::rebatching_holds(d.c, d.r));  // what the other batch is, not the way asked for
    const auto chunk = [](const Case& x) {
      return launch_geometry(x.batch(), x.max_seq_len, x.world, x.heads, x.query_len).chunk;
    };
    gen::count_class("the chunk changes with the batch", chunk(d.c) != chunk(d.r.batch));
  };
  CampaignPlan plan = o.campaign;
  plan.floors.clear();
  for (const std::string& how : gen::rebatching_kinds()) plan.floors.push_back({kThe + how, 0.25});
  return run_campaign(b, plan, steps, oracle_name(b.oracle()));
}

}  // namespace

CheckDef batch_invariance_check() {
  return {"batch_invariance", "a request's rows are bitwise the same in another batch (batch-size dependent paths)", 10,
          {}, "", true, false, run};
}

}  // namespace ctxscore::harness
