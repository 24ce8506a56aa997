// The project's HIP kernel as a native port library (native_port.h, GPU
// memory): the native worker's proof on a machine with a GPU, and the shape
// of what a C++, HIP or CUDA port exports.
#include <cstdio>
#include <exception>
#include <utility>

#include "context_score.hpp"
#include "native_port.h"

namespace {

ctxscore::TensorRef ref_of(const ctxscore_tensor& t, ctxscore::DType dtype) {
  ctxscore::TensorRef r;
  r.data = t.data;
  r.dtype = dtype;
  r.device = {ctxscore::Device::Kind::gpu, 0};
  r.ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    r.shape[d] = t.shape[d];
    r.strides[d] = t.strides[d];
  }
  return r;
}

}  // namespace

extern "C" const char* ctxscore_port_name(void) { return "ctxscore HIP kernel (native)"; }
extern "C" int ctxscore_port_memory(void) { return 1; }

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
    const auto stream = static_cast<hipStream_t>(call->stream);
    LaunchResult r = indexer_context_scores(a, stream);
    hipStreamCaptureStatus capturing = hipStreamCaptureStatusNone;
    check_hip(hipStreamIsCapturing(stream, &capturing), "hipStreamIsCapturing");
    if (capturing == hipStreamCaptureStatusNone) check_hip(hipStreamSynchronize(stream), "context_score_kernel");
    if (!r.used_given_out) {
      call->fresh = std::exchange(r.fresh.data, nullptr);
      call->fresh_shape[0] = r.fresh.heads;
      call->fresh_shape[1] = r.fresh.tokens;
      call->fresh_shape[2] = r.fresh.slots;
    }
    return 0;
  } catch (const std::exception& e) {
    std::snprintf(error, error_size, "%s", e.what());
    return 1;
  }
}

extern "C" void ctxscore_port_release(ctxscore_call* call) {
  if (call->fresh) (void)hipFree(call->fresh);
  call->fresh = nullptr;
}
