// Kernel speed at M3 decode shapes, on the GPU, in one run: the device copy
// bandwidth first, then each shape's per-call time (median over timed
// replays of one graph of many calls that rotates input sets, so nothing
// runs from L2; random data), the bytes the kernel must read, GB/s and the
// fraction of copy bandwidth, with the upstream kernel's time beside it
// where the brief measured one, and the launch floor: an empty kernel of the
// same grid and block size, timed the same way. Every configuration is
// spot-checked once against the reference.
//   ctxscore_kernel_benchmark [--csv FILE] [--replays N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "context_score.hpp"
#include "device_case.hpp"
#include "ctxscore/case.hpp"
#include "ctxscore/compare.hpp"
#include "ctxscore/score.hpp"
#include "platform.hpp"

namespace ctxscore {
namespace {

using test::check;
using test::DeviceBuffer;

// Random bf16 bits in the contract's numeric range, never zero-filled.
__global__ void fill_bf16(std::uint16_t* p, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint64_t x = (static_cast<std::uint64_t>(e) + seed) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    p[e] = static_cast<std::uint16_t>(((x & 1u) << 15) | ((121u + (x >> 1) % 8u) << 7) | ((x >> 8) & 0x7Fu));
  }
}
__global__ void fill_f32(float* p, std::int64_t n, float v) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    p[e] = v;
}

// The launch floor's kernel: nothing to do, so its time per call in a graph
// is what launching and retiring the grid costs.
__global__ void empty_program() {}

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times `launch` (enqueuing one call on `s`) with events around each of
// `n` launches after `warm` untimed ones; returns the median in µs.
template <typename F>
double time_us(hipStream_t s, int warm, int n, F&& launch) {
  hipEvent_t a, b;
  check(hipEventCreate(&a), "event");
  check(hipEventCreate(&b), "event");
  for (int k = 0; k < warm; ++k) launch(k);
  std::vector<float> ms(static_cast<std::size_t>(n));
  for (int k = 0; k < n; ++k) {
    check(hipEventRecord(a, s), "record");
    launch(warm + k);
    check(hipEventRecord(b, s), "record");
    check(hipEventSynchronize(b), "sync");
    check(hipEventElapsedTime(&ms[static_cast<std::size_t>(k)], a, b), "elapsed");
  }
  (void)hipEventDestroy(a);
  (void)hipEventDestroy(b);
  return median(ms) * 1e3;
}

double copy_bandwidth(hipStream_t s) {
  const std::size_t bytes = std::size_t{1} << 31;
  DeviceBuffer x(bytes), y(bytes);
  fill_bf16<<<1024, 256, 0, s>>>(static_cast<std::uint16_t*>(x.get()), bytes / 2, 1);
  const double us = time_us(s, 3, 20, [&](int) {
    check(hipMemcpyAsync(y.get(), x.get(), bytes, hipMemcpyDeviceToDevice, s), "copy");
  });
  return 2.0 * bytes / (us * 1e-6);  // read + write
}

struct Shape {
  std::int64_t batch, context, heads, query_len, world, rank;
  double upstream_us;  // 0: not measured upstream
  bool chunk_one;      // the alternative geometry: CHUNK = 1
  int teams, ring_pages;  // the kernel shape: 0, the launcher's choice; else forced
};

struct Row {
  Shape s;
  double us, bytes, gbps, fraction, launch_floor_us;
  std::int64_t grid_y, chunk;
  int teams, ring_pages, live_rows;
  std::string check;
};

// Reference spot check: the first min(B, 2) requests of set 0, rebuilt on
// the host from the pages they read.
std::string spot_check(const Shape& sh, const Geometry& g, const std::vector<std::uint16_t>& q_host,
                       const std::uint16_t* cache_dev, const std::vector<std::int32_t>& table_host,
                       const float* out_dev, float sentinel) {
  const std::int64_t b = std::min<std::int64_t>(sh.batch, 2), L = g.local, G = g.global, H = sh.heads, QL = sh.query_len;
  const std::int64_t T = sh.batch * QL;
  Case c;
  c.label = "benchmark_spot_check";
  c.heads = H;
  c.query_len = QL;
  c.world = sh.world;
  c.rank = sh.rank;
  c.max_seq_len = sh.context;
  c.seq_lens.assign(static_cast<std::size_t>(b), static_cast<std::int32_t>(sh.context));
  c.pages = b * L;
  c.table_width = c.table_row_stride = G;
  c.block_table.assign(static_cast<std::size_t>(b * G), 0);
  c.sentinel = sentinel;
  std::vector<bf16> cache(static_cast<std::size_t>(c.pages * kPageElems));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < L; ++j) {
      const std::int64_t blk = block_of_slot(j, sh.rank, sh.world);
      if (blk >= G) continue;
      const std::int64_t page = table_host[static_cast<std::size_t>(i * G + blk)], local = i * L + j;
      c.block_table[static_cast<std::size_t>(i * G + blk)] = static_cast<std::int32_t>(local);
      check(hipMemcpy(cache.data() + local * kPageElems, cache_dev + page * kPageElems, kPageElems * 2, hipMemcpyDeviceToHost), "spot page");
    }
  std::vector<bf16> q(static_cast<std::size_t>(b * QL * H * kHeadDim));
  std::memcpy(q.data(), q_host.data(), q.size() * 2);
  HostCase h = lay_out(c, q, std::move(cache));
  const std::vector<float> before = h.out;
  std::vector<float> after(h.out.size());
  std::vector<float> full(static_cast<std::size_t>(H * T * L));
  check(hipMemcpy(full.data(), out_dev, full.size() * 4, hipMemcpyDeviceToHost), "spot out");
  for (std::int64_t hd = 0; hd < H; ++hd)
    for (std::int64_t r = 0; r < b * QL; ++r)
      std::memcpy(&after[static_cast<std::size_t>((hd * b * QL + r) * L)], &full[static_cast<std::size_t>((hd * T + r) * L)], L * 4);
  const ShardScores ref = score_shard(h.args());
  const CompareReport rep = compare(ref, h.out_layout(), before.data(), after.data(), static_cast<std::int64_t>(after.size()));
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s (%lld checked, ratio %.3g)", rep.ok() ? "ok" : "MISMATCH",
                static_cast<long long>(rep.written), rep.worst_ratio);
  if (!rep.ok()) std::fprintf(stderr, "spot check failed: %s\n", rep.summary().c_str());
  return buf;
}

Row measure(const Shape& sh, double copy_bps, hipStream_t s, int replays) {
  const Geometry prod = launch_geometry(sh.batch, sh.context, sh.world, sh.heads, sh.query_len);
  const std::int64_t G = prod.global, L = prod.local, B = sh.batch, H = sh.heads, QL = sh.query_len, T = B * QL;
  const std::int64_t scan = scan_slots(sh.context, G, L, sh.rank, sh.world);
  const double page_bytes = static_cast<double>(B * scan) * kPageElems * 2;
  const double bytes = page_bytes + static_cast<double>(T * H * kHeadDim * 2) + static_cast<double>(H * T * scan * 4) +
                       static_cast<double>(B * scan * 4 + B * 4);
  // Distinct input sets: 512 MiB of them, or 64 (always several times the 50 MiB L2).
  const int sets = static_cast<int>(std::clamp<double>(std::ceil(512.0 * (1 << 20) / bytes), 2, 64));
  const std::int64_t pages_per_set = B * L;
  DeviceBuffer cache(static_cast<std::size_t>(sets * pages_per_set) * kPageElems * 2);
  fill_bf16<<<4096, 256, 0, s>>>(static_cast<std::uint16_t*>(cache.get()), sets * pages_per_set * kPageElems, 7);
  std::vector<DeviceBuffer> qs, tables, lens, outs;
  std::vector<std::uint16_t> q0;
  std::vector<std::int32_t> table0;
  const float sentinel = -12345.0f;
  for (int k = 0; k < sets; ++k) {
    std::vector<std::uint16_t> q(static_cast<std::size_t>(T * H * kHeadDim));
    for (std::size_t e = 0; e < q.size(); ++e) q[e] = content_bits(100 + k, Stream::queries, e);
    std::vector<std::int32_t> table(static_cast<std::size_t>(B * G)), len(static_cast<std::size_t>(B), static_cast<std::int32_t>(sh.context));
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t b = 0; b < G; ++b)  // the shard's blocks get distinct pages; others point anywhere
        table[static_cast<std::size_t>(i * G + b)] = static_cast<std::int32_t>(k * pages_per_set + i * L + std::min(b / sh.world, L - 1));
    qs.emplace_back(q.size() * 2);
    tables.emplace_back(table.size() * 4);
    lens.emplace_back(len.size() * 4);
    outs.emplace_back(static_cast<std::size_t>(H * T * L) * 4);
    check(hipMemcpy(qs.back().get(), q.data(), q.size() * 2, hipMemcpyHostToDevice), "q");
    check(hipMemcpy(tables.back().get(), table.data(), table.size() * 4, hipMemcpyHostToDevice), "table");
    check(hipMemcpy(lens.back().get(), len.data(), len.size() * 4, hipMemcpyHostToDevice), "lens");
    fill_f32<<<1024, 256, 0, s>>>(static_cast<float*>(outs.back().get()), H * T * L, sentinel);
    if (k == 0) {
      q0 = q;
      table0 = table;
    }
  }
  check(hipStreamSynchronize(s), "fill");
  const Device gpu{Device::Kind::gpu, 0};
  std::optional<GeometryOverride> over;
  if (sh.chunk_one) over = GeometryOverride{1, L, sh.teams, sh.ring_pages};
  else if (sh.teams != 0 || sh.ring_pages != 0) over = GeometryOverride{prod.chunk, prod.grid_y, sh.teams, sh.ring_pages};
  // One graph of many calls, cycling through the input sets: a replay's
  // time over its calls is the per-call time without host launch latency.
  const int calls = std::max(sets, 16);
  std::vector<ScoreArgs> args;
  for (int k = 0; k < sets; ++k) {
    ScoreArgs a;
    a.idx_q = make_tensor(qs[k].get(), DType::bf16, gpu, {T, H, kHeadDim});
    a.index_cache = make_tensor(cache.get(), DType::bf16, gpu, {sets * pages_per_set, kBlockTokens, kHeadDim});
    a.block_table = make_tensor(tables[k].get(), DType::i32, gpu, {B, G});
    a.seq_lens = make_tensor(lens[k].get(), DType::i32, gpu, {B});
    a.max_seq_len = sh.context;
    a.rank = sh.rank;
    a.world = sh.world;
    a.max_query_len = QL;
    a.sm_scale = 0.08838834764831845;
    a.out = make_tensor(outs[k].get(), DType::f32, gpu, {H, T, L});
    args.push_back(a);
  }
  Geometry launched;
  int teams = 0, ring_pages = 0, live_rows = 0, threads = 0;
  hipGraph_t graph;
  check(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal), "capture");
  for (int k = 0; k < calls; ++k) {
    LaunchResult r = indexer_context_scores(args[static_cast<std::size_t>(k % sets)], s, over);
    launched = r.geometry;
    teams = r.teams;
    ring_pages = r.ring_pages;
    live_rows = r.live_rows;
    threads = r.threads;
  }
  check(hipStreamEndCapture(s, &graph), "end capture");
  hipGraphExec_t exec;
  check(hipGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
  (void)hipGraphDestroy(graph);
  const double us = time_us(s, 3, replays, [&](int) { check(hipGraphLaunch(exec, s), "replay"); }) / calls;
  check(hipStreamSynchronize(s), "replays");
  (void)hipGraphExecDestroy(exec);
  // The same number of empty launches of the same grid and block size.
  const dim3 grid(static_cast<unsigned>(launched.grid_x), static_cast<unsigned>(launched.grid_y));
  check(hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal), "capture floor");
  for (int k = 0; k < calls; ++k) empty_program<<<grid, threads, 0, s>>>();
  check(hipStreamEndCapture(s, &graph), "end capture floor");
  check(hipGraphInstantiateWithFlags(&exec, graph, 0), "instantiate floor");
  (void)hipGraphDestroy(graph);
  const double floor_us = time_us(s, 3, replays, [&](int) { check(hipGraphLaunch(exec, s), "replay floor"); }) / calls;
  check(hipStreamSynchronize(s), "floor replays");
  (void)hipGraphExecDestroy(exec);
  Row r{sh, us, bytes, bytes / (us * 1e-6) * 1e-9, bytes / (us * 1e-6) / copy_bps, floor_us, launched.grid_y, launched.chunk, teams, ring_pages, live_rows, ""};
  r.check = spot_check(sh, prod, q0, static_cast<const std::uint16_t*>(cache.get()), table0, static_cast<const float*>(outs[0].get()), sentinel);
  return r;
}

}  // namespace
}  // namespace ctxscore

int main(int argc, char** argv) {
  using namespace ctxscore;
  std::string csv = std::getenv("OUT") ? std::string(std::getenv("OUT")) + "/kernel_benchmark.csv" : "kernel_benchmark.csv";
  int replays = 200;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (!std::strcmp(argv[k], "--csv")) csv = argv[k + 1];
    else if (!std::strcmp(argv[k], "--replays")) replays = std::max(100, std::atoi(argv[k + 1]));
    else {
      std::fprintf(stderr, "unknown argument %s; usage: %s [--csv FILE] [--replays N>=100]\n", argv[k], argv[0]);
      return 2;
    }
  }
  try {
    hipStream_t s;
    check(hipStreamCreate(&s), "stream");
    const double copy = copy_bandwidth(s);
    std::printf("device copy bandwidth (read + write): %.2f TB/s\n", copy * 1e-12);
    const struct { std::int64_t b, ctx; double up; } upstream[] = {
        {1, 32768, 6.3}, {1, 131072, 8.6}, {8, 32768, 9.7}, {8, 131072, 21.6}, {1, 1 << 20, 23.7},
        {64, 32768, 36.7}, {64, 131072, 130.7}, {8, 1 << 20, 128.9}, {256, 131072, 492}};
    std::vector<Shape> shapes;
    for (const auto& u : upstream) shapes.push_back({u.b, u.ctx, 4, 1, 4, 1, u.up, false, 0, 0});
    for (const auto& u : upstream) shapes.push_back({u.b, u.ctx, 4, 4, 4, 1, 0, false, 0, 0});
    shapes.push_back({64, 65536, 16, 1, 1, 0, 0, false, 0, 0});
    for (const auto& u : upstream)
      if (u.b <= 8) shapes.push_back({u.b, u.ctx, 4, 1, 4, 1, u.up, true, 0, 0});
    // The launcher's alternatives, forced, side by side: for the small
    // launches two teams of two-page rings and one team of a one-page ring;
    // for the others one team with either ring depth; and for speculative
    // decode's launches past one wave (two-page rings) one-page rings.
    for (const auto& u : upstream) {
      const bool small = u.b * u.ctx <= 8 * 32768;
      shapes.push_back({u.b, u.ctx, 4, 1, 4, 1, u.up, false, small ? 2 : 1, small ? 2 : 1});
      shapes.push_back({u.b, u.ctx, 4, 1, 4, 1, u.up, false, 1, small ? 1 : 2});
    }
    for (const auto& u : upstream)
      if (u.b * u.ctx > 8 * 131072) shapes.push_back({u.b, u.ctx, 4, 4, 4, 1, 0, false, 1, 1});
    std::vector<Row> rows;
    for (const Shape& sh : shapes) {
      rows.push_back(measure(sh, copy, s, replays));
      const Row& r = rows.back();
      std::fprintf(stderr, "measured B=%lld ctx=%lld H=%lld QL=%lld world=%lld%s teams=%d ring pages=%d live rows=%d: %.1f us, %s\n",
                   (long long)sh.batch, (long long)sh.context, (long long)sh.heads, (long long)sh.query_len,
                   (long long)sh.world, sh.chunk_one ? " CHUNK=1" : "", r.teams, r.ring_pages, r.live_rows, r.us,
                   r.check.c_str());
    }
    FILE* f = std::fopen(csv.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + csv);
    std::fprintf(f, "batch,context,heads,query_len,world,rank,geometry,chunk,grid_y,teams,ring_pages,live_rows,shape_forced,us_median,launch_floor_us,bytes,gbps,fraction_of_copy,copy_tbps,upstream_us,spot_check\n");
    for (const Row& r : rows)
      std::fprintf(f, "%lld,%lld,%lld,%lld,%lld,%lld,%s,%lld,%lld,%d,%d,%d,%d,%.3f,%.3f,%.0f,%.1f,%.4f,%.4f,%.1f,%s\n", (long long)r.s.batch,
                   (long long)r.s.context, (long long)r.s.heads, (long long)r.s.query_len, (long long)r.s.world,
                   (long long)r.s.rank, r.s.chunk_one ? "chunk1" : "production", (long long)r.chunk, (long long)r.grid_y,
                   r.teams, r.ring_pages, r.live_rows, r.s.teams != 0 || r.s.ring_pages != 0, r.us, r.launch_floor_us, r.bytes, r.gbps, r.fraction, copy * 1e-12, r.s.upstream_us, r.check.c_str());
    std::fclose(f);
    std::printf("\n%6s %8s %3s %3s %5s %-10s %6s %8s %10s %7s %10s %9s %8s %10s %8s  %s\n", "batch", "context", "H", "QL", "world",
                "geometry", "grid_y", "shape", "us", "launch", "MiB read", "GB/s", "of copy", "upstream", "speedup", "spot check");
    for (const Row& r : rows) {
      char up[16] = "-", sp[16] = "-";
      if (r.s.upstream_us > 0) {
        std::snprintf(up, sizeof up, "%.1f", r.s.upstream_us);
        std::snprintf(sp, sizeof sp, "%.2fx", r.s.upstream_us / r.us);
      }
      char tm[24];
      std::snprintf(tm, sizeof tm, "%dx%d/%d%s", r.teams, r.ring_pages, r.live_rows,
                    r.s.teams != 0 || r.s.ring_pages != 0 ? "!" : "");
      std::printf("%6lld %7lldK %3lld %3lld %5lld %-10s %6lld %8s %10.1f %7.1f %10.1f %9.0f %8.2f %10s %8s  %s\n", (long long)r.s.batch,
                  (long long)(r.s.context / 1024), (long long)r.s.heads, (long long)r.s.query_len, (long long)r.s.world,
                  r.s.chunk_one ? "CHUNK=1" : "production", (long long)r.grid_y, tm, r.us, r.launch_floor_us, r.bytes / (1 << 20), r.gbps,
                  r.fraction, up, sp, r.check.c_str());
    }
    std::printf("shape: teams per program x pages per team's ring / query rows the score step reads (! = forced;\n"
                "otherwise the launcher's choice); launch: us per call of an empty kernel of the same grid and block\n"
                "raw numbers: %s\n",
                csv.c_str());
    for (const Row& r : rows)
      if (r.check.rfind("ok", 0) != 0) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore_kernel_benchmark: %s\n", e.what());
    return 1;
  }
  return 0;
}
