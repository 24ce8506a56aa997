// What the checks over named cases share (large_offsets, large_batches):
// one case judged as it is, unshrunk, its fixture written on a failure.
#pragma once

#include <string>

#include "ctxscore/harness/checks.hpp"

namespace ctxscore::harness::checks {

// Judges `c` into `s` as row `row`. A pass that wrote no finite score tested
// nothing, and is an error saying what it missed (`untested`).
inline Verdict judge_named_case(Suite& s, Backend& b, const Case& c, const std::string& row, const std::string& untested) {
  JudgeOptions o;
  o.write_failure = true;
  Verdict v = run_and_judge(b, c, o);
  if (v.ok() && v.report.written_finite == 0) v.fail(Fault::untested, "the case wrote no finite score: " + untested);
  s.add(row, v, v.fixture);
  ++s.min_cases;
  return v;
}

}  // namespace ctxscore::harness::checks
