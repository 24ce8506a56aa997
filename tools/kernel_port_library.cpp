// The project's HIP kernel as a native port library (native_port.h, GPU
// memory): the native worker's proof on a machine with a GPU, and the shape
// of what a C++, HIP or CUDA port exports.
#include <cstdio>
#include <exception>
#include <utility>

#include "context_score.hpp"
#include "native_call.hpp"

extern "C" const char* ctxscore_port_name(void) { return "ctxscore HIP kernel (native)"; }
extern "C" int ctxscore_port_memory(void) { return 1; }

extern "C" int ctxscore_port_score(ctxscore_call* call, char* error, size_t error_size) {
  using namespace ctxscore;
  try {
    ScoreArgs a = score_args_of(*call, Device{Device::Kind::gpu, 0});
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
