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
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
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
