// A case's buffers on the GPU, and the one check every kernel property makes:
// launch, copy back, compare with the reference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "context_score.hpp"
#include "ctxscore/case.hpp"
#include "ctxscore/compare.hpp"

namespace ctxscore::test {

bool gpu_present();  // false: the gpu tests skip, saying why
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
  void upload(const void* src, std::size_t bytes, hipStream_t stream = nullptr);
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
  // Rewrites every buffer from `host` in place (same addresses: graph replay).
  void refill(HostCase& host, hipStream_t stream);
  std::vector<float> download_out() const;
};

struct KernelVerdict {
  CompareReport report;
  LaunchResult launch;
  std::string str() const;
};

// Totals over every check_kernel call of the process (reset per property by
// the runner's stats hook).
struct KernelStats {
  std::int64_t cases = 0, written = 0, neg_inf = 0;
  std::map<std::tuple<int, int, int>, std::int64_t> shapes;  // launches by (teams, ring pages, live rows)
  double worst_ratio = 0;
  std::string worst_case;
  void add(const Case& c, const CompareReport& r, const LaunchResult& launch);
  std::string str() const;
};
KernelStats& kernel_stats();

// Uploads `host`, launches (with its geometry override, if any), and
// returns the whole out allocation after the call: the `hip` backend.
std::vector<float> run_kernel(HostCase& host, hipStream_t stream = nullptr, LaunchResult* launch = nullptr);

// Materializes, launches (with the case's geometry override, if any), and
// compares against the reference. The property suite's one oracle.
KernelVerdict check_kernel(const Case& c, hipStream_t stream = nullptr);

void check(hipError_t e, const char* what);

}  // namespace ctxscore::test
