// The one place where platforms differ in name. The kernel and its launcher
// are written against HIP; under nvcc (CTXSCORE_PLATFORM_CUDA) the HIP names
// they use map onto CUDA. Only names the project uses appear here.
#pragma once

#if defined(CTXSCORE_PLATFORM_CUDA)
#include <cuda_runtime.h>

#define hipError_t cudaError_t
#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceProp_t cudaDeviceProp
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipStream_t cudaStream_t
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamCaptureStatus cudaStreamCaptureStatus
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamEndCapture cudaStreamEndCapture
#define hipGraph_t cudaGraph_t
#define hipGraphExec_t cudaGraphExec_t
#define hipGraphInstantiateWithFlags cudaGraphInstantiateWithFlags
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphGetNodes cudaGraphGetNodes
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipEvent_t cudaEvent_t
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipDeviceAttribute_t cudaDeviceAttr
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount

#define CTXSCORE_WAVE 32
// Shared memory one block may use (after opting in above 48 KiB).
#define CTXSCORE_SHARED_LIMIT_ATTR cudaDevAttrMaxSharedMemoryPerBlockOptin

#else
#include <hip/hip_runtime.h>
#define CTXSCORE_WAVE 64  // gfx90a / gfx940 wavefront
#define CTXSCORE_SHARED_LIMIT_ATTR hipDeviceAttributeMaxSharedMemoryPerBlock
#endif

#include <stdexcept>
#include <string>

namespace ctxscore {
// The one check of a HIP (or CUDA) runtime call: a failing call becomes an
// exception naming the call.
inline void check_hip(hipError_t e, const char* what) {
  if (e != hipSuccess) throw std::runtime_error(std::string(what) + ": " + hipGetErrorString(e));
}
// The runtime, driver and device this process runs on, for reports and
// failure fixtures: a failure can come from a toolchain as well as a kernel.
inline std::string runtime_description() {
#if defined(CTXSCORE_PLATFORM_CUDA)
  std::string s = "cuda";
#else
  std::string s = "hip";
#endif
  int runtime = 0, driver = 0, device = 0;
  if (hipRuntimeGetVersion(&runtime) == hipSuccess) s += " runtime " + std::to_string(runtime);
  if (hipDriverGetVersion(&driver) == hipSuccess) s += ", driver " + std::to_string(driver);
  hipDeviceProp_t p;
  if (hipGetDevice(&device) == hipSuccess && hipGetDeviceProperties(&p, device) == hipSuccess) s += ", " + std::string(p.name);
  (void)hipGetLastError();  // a failed query (no device) must not linger as the next call's error
  return s;
}
}  // namespace ctxscore

#if defined(__CUDACC__) || defined(__HIPCC__)  // device code; host-only includers skip it
namespace ctxscore {
// A butterfly shuffle over the whole wave. A function, not a macro named
// __shfl_xor: CUDA's own headers declare overloads of that name.
__device__ inline float shfl_xor(float var, int lane_mask) {
#if defined(CTXSCORE_PLATFORM_CUDA)
  return __shfl_xor_sync(0xffffffffu, var, lane_mask);  // CUDA names the member lanes
#else
  return __shfl_xor(var, lane_mask);
#endif
}
}  // namespace ctxscore
#endif
