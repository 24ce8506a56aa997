// The CPU reference as a native port library (native_port.h, host memory):
// what the native worker is tested with on any machine.
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>

#include "ctxscore/score.hpp"
#include "native_port.h"

namespace {

ctxscore::TensorRef ref_of(const ctxscore_tensor& t, ctxscore::DType dtype) {
  ctxscore::TensorRef r;
  r.data = t.data;
  r.dtype = dtype;
  r.ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    r.shape[d] = t.shape[d];
    r.strides[d] = t.strides[d];
  }
  return r;
}

}  // namespace

extern "C" const char* ctxscore_port_name(void) { return "ctxscore reference (native)"; }
extern "C" int ctxscore_port_memory(void) { return 0; }

extern "C" int ctxscore_port_score(ctxscore_call* call, char* error, size_t error_size) {
  using namespace ctxscore;
  try {
    ScoreArgs a;
    a.idx_q = ref_of(call->idx_q, DType::bf16);
    a.index_cache = ref_of(call->index_cache, DType::bf16);
    a.block_table = ref_of(call->block_table, DType::i32);
    a.seq_lens = ref_of(call->seq_lens, DType::i32);
    a.max_seq_len = call->max_seq_len;
    a.rank = call->rank;
    a.world = call->world_size;
    a.max_query_len = call->max_query_len;
    a.sm_scale = call->sm_scale;
    if (call->has_out) a.out = ref_of(call->out, DType::f32);
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
