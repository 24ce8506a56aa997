// The `hip` backend: the project's kernel in this process, on the GPU.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "context_score.hpp"
#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/device.hpp"
#include "ctxscore/harness/graph_timing.hpp"
#include "ctxscore/harness/phases.hpp"

namespace ctxscore::harness {

namespace {

// Whether this machine has a GPU driver at all: without one, the runtime's
// error means "no GPU"; with one, any error is a broken device, not a skip.
bool driver_present() {
#if defined(CTXSCORE_PLATFORM_CUDA)
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) dlclose(lib);
  return lib != nullptr;
#else
  return access("/dev/kfd", F_OK) == 0;
#endif
}

}  // namespace

std::string gpu_absence_reason() {
  int n = 0;
  const hipError_t e = hipGetDeviceCount(&n);
  if (e == hipSuccess && n > 0) return "";
  if (e == hipSuccess) return "no GPU: the runtime reports 0 devices";
  if (e == hipErrorNoDevice) return std::string("no GPU: no device visible (") + hipGetErrorString(e) + ")";
  const std::string what = std::string("hipGetDeviceCount failed: ") + hipGetErrorString(e);
  if (!driver_present()) return "no GPU: no GPU driver on this machine (" + what + ")";
  throw std::runtime_error("GPU error on a machine with a GPU driver: " + what + "; expected a device or none");
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  check_hip(hipMalloc(&ptr_, bytes ? bytes : 1), "hipMalloc");
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) (void)hipFree(ptr_);
}
void DeviceBuffer::upload(const void* src, std::size_t bytes, void* stream_handle) {
  const auto stream = static_cast<hipStream_t>(stream_handle);
  if (bytes > bytes_)
    throw std::invalid_argument("DeviceBuffer::upload: " + std::to_string(bytes) + " bytes into a buffer of " +
                                std::to_string(bytes_));
  check_hip(hipMemcpyAsync(ptr_, src, bytes, hipMemcpyHostToDevice, stream), "hipMemcpyAsync(upload)");
}
void DeviceBuffer::download(void* dst, std::size_t bytes) const {
  check_hip(hipMemcpy(dst, ptr_, bytes, hipMemcpyDeviceToHost), "hipMemcpy(download)");
}

namespace {

template <typename T>
DeviceBuffer copy_of(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

template <typename T>
void refill_one(DeviceBuffer& b, const std::vector<T>& v, const char* name, hipStream_t s) {
  if (v.size() * sizeof(T) != b.bytes())
    throw std::invalid_argument(std::string("refill: ") + name + " has " + std::to_string(v.size() * sizeof(T)) +
                                " bytes, the captured buffer " + std::to_string(b.bytes()) +
                                " (a replay needs the captured layout)");
  b.upload(v.data(), b.bytes(), s);
}

}  // namespace

DeviceCase::DeviceCase(HostCase& host)
    : q(copy_of(host.q)), cache(copy_of(host.cache)), table(copy_of(host.table)), lens(copy_of(host.lens)),
      out(copy_of(host.out)) {
  args = host.args({Device::Kind::gpu, 0});
  args.idx_q.data = q.get();
  args.index_cache.data = cache.get();
  args.block_table.data = table.get();
  args.seq_lens.data = lens.get();
  args.out->data = out.get();
  check_hip(hipDeviceSynchronize(), "upload");
}

void DeviceCase::refill(const HostCase& host, void* stream_handle) {
  const auto stream = static_cast<hipStream_t>(stream_handle);
  refill_one(q, host.q, "idx_q", stream);
  refill_one(cache, host.cache, "index_cache", stream);
  refill_one(table, host.table, "block_table", stream);
  refill_one(lens, host.lens, "seq_lens", stream);
  refill_one(out, host.out, "out", stream);
}

std::vector<float> DeviceCase::download_out() const {
  std::vector<float> v(out.bytes() / sizeof(float));
  out.download(v.data(), v.size() * sizeof(float));
  return v;
}

namespace {

std::string shape_of(const LaunchResult& r) {
  return std::to_string(r.teams) + "x" + std::to_string(r.ring_pages) + "/" + std::to_string(r.live_rows);
}

class HipCapture : public CapturedScore {
 public:
  HipCapture(HostCase& dummy, std::int64_t bound, hipStream_t stream) : dev_(dummy), stream_(stream) {
    ScoreArgs a = dev_.args;
    a.max_seq_len = bound;
    graph_ = capture_graph(stream_, [&] { launch_ = indexer_context_scores(a, stream_, dummy.spec.geometry); });
    check_hip(hipGraphInstantiateWithFlags(&exec_, graph_, 0), "hipGraphInstantiateWithFlags");
  }
  ~HipCapture() override {
    if (exec_) (void)hipGraphExecDestroy(exec_);
    if (graph_) (void)hipGraphDestroy(graph_);
  }
  Scored replay(HostCase& real) override {
    dev_.refill(real, stream_);
    check_hip(hipGraphLaunch(exec_, stream_), "hipGraphLaunch");
    check_hip(hipStreamSynchronize(stream_), "replay");
    Scored s;
    s.out = dev_.download_out();
    s.shape = shape_of(launch_);
    return s;
  }

 private:
  DeviceCase dev_;
  hipStream_t stream_;
  LaunchResult launch_;
  hipGraph_t graph_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
};

class HipBackend : public Backend {
 public:
  HipBackend() { check_hip(hipStreamCreate(&stream_), "hipStreamCreate"); }
  ~HipBackend() override {
    if (stream_) (void)hipStreamDestroy(stream_);
  }
  std::string name() const override { return "hip"; }
  std::string toolchain() const override { return kernel_toolchain(); }
  Oracle oracle() const override { return Oracle::reference; }
  gen::CaseLimits fuzz_limits() const override { return gen::kernel_limits(max_teams(), max_ring_pages()); }

  Scored score(HostCase& host, OutMode mode) override {
    const PhaseClock copies(Phase::transfer);
    DeviceCase dev(host);
    ScoreArgs a = dev.args;
    if (mode == OutMode::absent) a.out.reset();
    if (mode == OutMode::too_small) a.out = too_small(*a.out, host.spec.local());
    LaunchResult r;
    {
      const PhaseClock kernel(Phase::implementation);
      r = indexer_context_scores(a, stream_, host.spec.geometry);
      check_hip(hipStreamSynchronize(stream_), "kernel");
    }
    Scored s;
    s.shape = shape_of(r);
    if (mode != OutMode::absent) s.out = dev.download_out();
    if (!r.used_given_out) {
      std::vector<float> fresh(static_cast<std::size_t>(r.fresh.heads * r.fresh.tokens * r.fresh.slots));
      if (!fresh.empty())
        check_hip(hipMemcpy(fresh.data(), r.fresh.data, fresh.size() * sizeof(float), hipMemcpyDeviceToHost),
                  "hipMemcpy(fresh scores)");
      s.fresh = std::move(fresh);
    }
    return s;
  }

  // Each storage on the device where its view shares idx_q's device, on the
  // host where a breach moved it; every one read back after the call.
  CallOutcome call(RawCall& c) override {
    const Device here = c.idx_q.view.device;
    RawTensor* all[] = {&c.idx_q, &c.index_cache, &c.block_table, &c.seq_lens, &c.out};
    std::vector<DeviceBuffer> on_device;
    on_device.reserve(5);
    ScoreArgs a = c.args();
    TensorRef* refs[] = {&a.idx_q, &a.index_cache, &a.block_table, &a.seq_lens, &*a.out};
    for (int k = 0; k < 5; ++k) {
      on_device.emplace_back(all[k]->bytes.size());
      if (all[k]->view.device != here) {
        refs[k]->device = Device{};  // it stays in host memory, and says so
        continue;
      }
      on_device.back().upload(all[k]->bytes.data(), all[k]->bytes.size(), stream_);
      refs[k]->data = on_device.back().get();
      refs[k]->device = {Device::Kind::gpu, 0};
    }
    check_hip(hipStreamSynchronize(stream_), "upload");
    CallOutcome o;
    try {
      const LaunchResult r = indexer_context_scores(a, stream_, std::nullopt);
      check_hip(hipStreamSynchronize(stream_), "kernel");
      o.fresh = !r.used_given_out;
    } catch (const ContractError& e) {
      o.refused = true;
      o.reason = e.what();
      o.clause = e.clause();
    }
    for (int k = 0; k < 5; ++k)
      if (all[k]->view.device == here) on_device[static_cast<std::size_t>(k)].download(all[k]->bytes.data(), all[k]->bytes.size());
    return o;
  }

  std::unique_ptr<CapturedScore> capture(HostCase& dummy, std::int64_t captured_bound) override {
    return std::make_unique<HipCapture>(dummy, captured_bound, stream_);
  }

  // One graph of calls over rotating copies of the inputs that together
  // exceed the L2 cache (graph_timing.hpp), and the device's copy rate.
  Timing time(HostCase& host, int calls) override {
    const std::size_t one = host.q.size() * sizeof(bf16) + host.cache.size() * sizeof(bf16) +
                            host.table.size() * sizeof(std::int32_t) + host.out.size() * sizeof(float);
    constexpr std::size_t kPastL2 = std::size_t{256} << 20, kAtMost = std::size_t{8} << 30;
    std::vector<std::unique_ptr<DeviceCase>> sets;
    for (std::size_t bytes = 0; sets.empty() || (bytes < kPastL2 && bytes + one <= kAtMost); bytes += one)
      sets.push_back(std::make_unique<DeviceCase>(host));
    for (const auto& d : sets) indexer_context_scores(d->args, stream_, host.spec.geometry);  // warm-up
    const GraphTiming t = time_in_graph(stream_, static_cast<int>(sets.size()), calls, [&](int k) {
      indexer_context_scores(sets[static_cast<std::size_t>(k) % sets.size()]->args, stream_, host.spec.geometry);
    });
    if (copy_gb_per_s_ == 0) copy_gb_per_s_ = device_copy_gb_per_s(stream_);
    return {t.median_us, t.calls, t.method, copy_gb_per_s_};
  }

 private:
  hipStream_t stream_ = nullptr;
  double copy_gb_per_s_ = 0;  // measured by the first time()
};

}  // namespace

std::unique_ptr<Backend> make_hip_backend() { return std::make_unique<HipBackend>(); }
std::string hip_backend_unavailable() { return gpu_absence_reason(); }

}  // namespace ctxscore::harness
