// The CPU reference as a native port library (native_port.h, host memory):
// what the native worker is tested with on any machine.
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>

#include "ctxscore/score.hpp"
#include "native_call.hpp"

extern "C" const char* ctxscore_port_name(void) { return "ctxscore reference (native)"; }
extern "C" int ctxscore_port_memory(void) { return 0; }

extern "C" int ctxscore_port_score(ctxscore_call* call, char* error, size_t error_size) {
  using namespace ctxscore;
  try {
    ScoreArgs a = score_args_of(*call, Device{});
    const Layout layout = validate(a);
    if (a.out && out_fits(a, layout)) {
      score_shard(a);
      return 0;
    }
    a.out.reset();
    const ShardScores s = score_shard(a);
    call->fresh = new float[s.exact.size()];
    for (std::size_t e = 0; e < s.exact.size(); ++e)
      call->fresh[e] = s.written[e % s.written.size()] ? stored_value(s.exact[e]) : std::numeric_limits<float>::quiet_NaN();
    call->fresh_shape[0] = s.heads;
    call->fresh_shape[1] = s.tokens;
    call->fresh_shape[2] = s.slots;
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return 1;
  }
}

extern "C" void ctxscore_port_release(ctxscore_call* call) {
  delete[] call->fresh;
  call->fresh = nullptr;
}
