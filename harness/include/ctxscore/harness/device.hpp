// A case's buffers on the GPU (HIP, or CUDA through kernels/platform.hpp):
// what the in-process kernel backend and the kernel benchmark run on.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"

namespace ctxscore::harness {

// Empty when a GPU is present; "no GPU: ..." with why when the machine has
// no device or no GPU driver (the gpu tests skip with it). Any other device
// error, on a machine with a driver, throws std::runtime_error: a broken GPU
// is a failure, never a skip.
std::string gpu_absence_reason();

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  // `stream`: a hipStream_t (cudaStream_t on NVIDIA); null, the default stream.
  void upload(const void* src, std::size_t bytes, void* stream = nullptr);
  void download(void* dst, std::size_t bytes) const;

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Device copies of a HostCase's buffers, and ScoreArgs over them.
struct DeviceCase {
  DeviceBuffer q, cache, table, lens, out;
  ScoreArgs args;
  explicit DeviceCase(HostCase& host);
  // Rewrites every buffer from `host` in place (same addresses: what a graph
  // replay reads); `host` must have the same layout.
  void refill(const HostCase& host, void* stream);  // a hipStream_t
  std::vector<float> download_out() const;
};

}  // namespace ctxscore::harness
