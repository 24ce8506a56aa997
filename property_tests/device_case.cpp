#include "device_case.hpp"

#include <sstream>
#include <stdexcept>
#include <utility>

#include "ctxscore/score.hpp"

namespace ctxscore::test {

void check(hipError_t e, const char* what) {
  if (e != hipSuccess) throw std::runtime_error(std::string(what) + ": " + hipGetErrorString(e));
}

std::string gpu_absence_reason() {
  int n = 0;
  const hipError_t e = hipGetDeviceCount(&n);
  if (e != hipSuccess) return std::string("no GPU: hipGetDeviceCount failed: ") + hipGetErrorString(e);
  if (n == 0) return "no GPU: hipGetDeviceCount reports 0 devices";
  return "";
}
bool gpu_present() { return gpu_absence_reason().empty(); }

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  check(hipMalloc(&ptr_, bytes ? bytes : 1), "hipMalloc");
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
void DeviceBuffer::upload(const void* src, std::size_t bytes, hipStream_t stream) {
  if (bytes > bytes_) throw std::logic_error("DeviceBuffer::upload past the buffer");
  check(hipMemcpyAsync(ptr_, src, bytes, hipMemcpyHostToDevice, stream), "hipMemcpyAsync(upload)");
}
void DeviceBuffer::download(void* dst, std::size_t bytes) const {
  check(hipMemcpy(dst, ptr_, bytes, hipMemcpyDeviceToHost), "hipMemcpy(download)");
}

template <typename T>
static DeviceBuffer copy_of(const std::vector<T>& v) {
  DeviceBuffer b(v.size() * sizeof(T));
  b.upload(v.data(), v.size() * sizeof(T));
  return b;
}

DeviceCase::DeviceCase(HostCase& host)
    : q(copy_of(host.q)), cache(copy_of(host.cache)), table(copy_of(host.table)), lens(copy_of(host.lens)),
      out(copy_of(host.out)) {
  args = host.args({Device::Kind::gpu, 0});
  args.idx_q.data = q.get();
  args.index_cache.data = cache.get();
  args.block_table.data = table.get();
  args.seq_lens.data = lens.get();
  args.out->data = out.get();
  check(hipDeviceSynchronize(), "upload");
}

void DeviceCase::refill(HostCase& host, hipStream_t stream) {
  q.upload(host.q.data(), host.q.size() * sizeof(bf16), stream);
  cache.upload(host.cache.data(), host.cache.size() * sizeof(bf16), stream);
  table.upload(host.table.data(), host.table.size() * sizeof(std::int32_t), stream);
  lens.upload(host.lens.data(), host.lens.size() * sizeof(std::int32_t), stream);
  out.upload(host.out.data(), host.out.size() * sizeof(float), stream);
}

std::vector<float> DeviceCase::download_out() const {
  std::vector<float> v(out.bytes() / sizeof(float));
  out.download(v.data(), v.size() * sizeof(float));
  return v;
}

std::string KernelVerdict::str() const {
  std::ostringstream s;
  const Geometry& g = launch.geometry;
  s << report.summary() << " [grid " << g.grid_x << "x" << g.grid_y << " CHUNK " << g.chunk << " N " << g.tile_n
    << " teams " << launch.teams << " ring pages " << launch.ring_pages << " live rows " << launch.live_rows << "]";
  return s.str();
}

KernelStats& kernel_stats() {
  static KernelStats s;
  return s;
}

std::string KernelStats::str() const {
  std::ostringstream o;
  o.precision(4);
  o << "kernel comparisons: " << cases << " cases (by teams x ring pages / live rows:";
  for (const auto& [shape, n] : shapes)
    o << " " << std::get<0>(shape) << "x" << std::get<1>(shape) << "/" << std::get<2>(shape) << " " << n;
  o << "), " << written << " written elements (" << neg_inf << " -inf), worst error/bound ratio " << worst_ratio;
  if (!worst_case.empty()) o << " in " << worst_case;
  return o.str();
}

void KernelStats::add(const Case& c, const CompareReport& r, const LaunchResult& launch) {
  ++cases;
  ++shapes[{launch.teams, launch.ring_pages, launch.live_rows}];
  written += r.written;
  neg_inf += r.written_neg_inf;
  if (r.worst_ratio > worst_ratio) {
    worst_ratio = r.worst_ratio;
    worst_case = c.str().substr(0, 160);
  }
}

std::vector<float> run_kernel(HostCase& host, hipStream_t stream, LaunchResult* launch) {
  DeviceCase dev(host);
  LaunchResult r = indexer_context_scores(dev.args, stream, host.spec.geometry);
  check(hipStreamSynchronize(stream), "kernel");
  if (launch) *launch = std::move(r);
  return dev.download_out();
}

KernelVerdict check_kernel(const Case& c, hipStream_t stream) {
  HostCase host = materialize(c);
  const std::vector<float> before = host.out;
  KernelVerdict v;
  const std::vector<float> after = run_kernel(host, stream, &v.launch);
  const ShardScores ref = score_shard(host.args());
  v.report = compare(ref, host.out_layout(), before.data(), after.data(), static_cast<std::int64_t>(after.size()));
  kernel_stats().add(c, v.report, v.launch);
  return v;
}

}  // namespace ctxscore::test
