// What the two pipeline checks share: a case and each rank's way of passing
// `out`, judged at world 1 and at every rank (pipeline.hpp).
#pragma once

#include <vector>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/pipeline.hpp"

namespace ctxscore::harness::checks {

struct PipelineDraw {
  Case c;
  std::vector<OutMode> modes;  // rank r's
};

inline rc::Gen<PipelineDraw> genPipelineDraw(const gen::CaseLimits& lim, bool selection) {
  return rc::gen::exec([lim, selection] {
    PipelineDraw d;
    d.c = selection ? *gen::genSelectionCase(lim) : *gen::genCase(lim);
    for (std::int64_t r = 0; r < d.c.world; ++r) d.modes.push_back(*gen::genOutMode());
    return d;
  });
}

// The pipeline verdict as a Verdict of the case: an error where a call
// raised, else `failed` (the check's own claim, of kind `claim`).
inline Trial pipeline_trial(Backend& b, const PipelineDraw& d, const PipelineVerdict& pv, bool failed, Fault claim) {
  Verdict v;
  v.spec = d.c;
  v.backend = b.name();
  v.oracle = oracle_name(Oracle::reference);
  if (!pv.error.empty()) v.fail(pv.error_fault, pv.error);
  else if (failed) v.fail(claim, pv.str());
  return Trial{v, b.replay_flags()};
}

}  // namespace ctxscore::harness::checks
