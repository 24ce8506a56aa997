// What the case-drawing checks share: a case and how its call passes `out`,
// drawn from the run's compile keys, and the domain's smaller cases.
#pragma once

#include <vector>

#include "ctxscore/harness/case_shrinks.hpp"
#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/compile_keys.hpp"

namespace ctxscore::harness::checks {

struct DrawnCase {
  Case c;
  OutMode out = OutMode::given;
};

inline gen::CaseLimits limits_of(Backend& b, const CheckOptions& o) {
  return o.size.empty() ? b.fuzz_limits() : gen::named_limits(o.size);
}

// Case k: from the run's compile keys when it has them; its out mode the
// options' or, for "mixed", drawn from the case's seed.
inline rc::Shrinkable<DrawnCase> with_out_mode(rc::Shrinkable<Case> c, const std::string& out_mode, std::uint64_t seed) {
  const OutMode out = out_mode == "mixed" ? gen::sample_out_mode(seed) : out_mode_named(out_mode);
  return rc::shrinkable::map(std::move(c), [out](Case x) { return DrawnCase{std::move(x), out}; });
}

inline std::function<rc::Shrinkable<DrawnCase>(std::uint64_t, int)> draw_cases(const CaseSource& source, const std::string& out_mode) {
  return [&source, out_mode](std::uint64_t seed, int size) { return with_out_mode(source.draw(seed, size), out_mode, seed); };
}

inline std::vector<DrawnCase> smaller_drawn(const DrawnCase& d) {
  std::vector<DrawnCase> out;
  for (Case& c : smaller_cases(d.c)) out.push_back({std::move(c), d.out});  // the way out is passed is kept: a bug may need it
  return out;
}

inline Trial judged_case(Backend& b, const DrawnCase& d, int repeat) {
  JudgeOptions o;
  o.out = d.out;
  o.write_failure = false;
  o.repeat = repeat;
  return Trial{run_and_judge(b, d.c, o), replay_flags(b, o)};
}

}  // namespace ctxscore::harness::checks
