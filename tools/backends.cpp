#include "backends.hpp"

#include <stdexcept>

#ifdef CTXSCORE_HAVE_HIP_BACKEND
#include "device_case.hpp"
#endif

namespace ctxscore::cli {

std::vector<Backend> all_backends() {
  std::vector<Backend> v;
  Backend ref;
  ref.name = "reference";
  ref.run = [](HostCase& h) {
    score_shard(h.args());
    return h.out;
  };
  ref.oracle = [](const ScoreArgs& a) { return score_shard_naive(a); };
  ref.oracle_name = "plain-loop scorer";
  v.push_back(ref);

  Backend hip;
  hip.name = "hip";
  hip.oracle = [](const ScoreArgs& a) { return score_shard(a); };
  hip.oracle_name = "reference";
#ifdef CTXSCORE_HAVE_HIP_BACKEND
  hip.fuzz_limits = gen::gpu_case_limits(max_teams(), max_ring_pages());
  hip.unavailable = test::gpu_absence_reason();
  hip.run = [](HostCase& h) { return test::run_kernel(h); };
#else
  hip.fuzz_limits = gen::gpu_case_limits();
  hip.unavailable = "this build has no GPU backend (configure with CTXSCORE_CUDA=ON)";
#endif
  v.push_back(hip);
  return v;
}

const Backend& backend_named(const std::string& name) {
  static const std::vector<Backend> backends = all_backends();
  for (const Backend& b : backends)
    if (b.name == name) {
      if (!b.unavailable.empty()) throw std::invalid_argument("--backend " + name + ": not available: " + b.unavailable);
      return b;
    }
  throw std::invalid_argument("--backend: \"" + name + "\" is not a backend, expected reference or hip");
}

}  // namespace ctxscore::cli
