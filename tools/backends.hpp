// The implementations the command line can check: each runs a case on its
// own buffers and returns the whole out allocation after the call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"
#include "ctxscore/score.hpp"
#include "generators.hpp"

namespace ctxscore::cli {

struct Backend {
  std::string name;
  std::string unavailable;  // why it cannot run here; empty when it can
  std::function<std::vector<float>(HostCase&)> run;
  // What fuzzing judges it against, and the case sizes that keep that in pace.
  std::function<ShardScores(const ScoreArgs&)> oracle;  // called without out
  std::string oracle_name;
  gen::CaseLimits fuzz_limits;
};

// "reference": score_shard, fuzzed against the plain-loop scorer.
// "hip": the kernel on the GPU, fuzzed against the reference.
std::vector<Backend> all_backends();
const Backend& backend_named(const std::string& name);  // throws std::invalid_argument

}  // namespace ctxscore::cli
