// Kernel speed at M3 serving shapes, on the GPU, in one run: the device copy
// bandwidth first, then for each benchmark case of the registry
// (named_cases.hpp) and the launcher's forced alternatives beside it, the
// per-call time (graph_timing.hpp, as `ctxscore bench` times: median over replays of one graph of many calls that
// rotates input sets, so nothing runs from L2), the bytes the kernel must
// read, GB/s and the fraction of copy bandwidth, with the upstream kernel's
// published time where there is one, and the launch floor: an empty kernel
// of the same grid and block size, timed the same way. Input set k is the
// case with seed + k (its pages placed after set k - 1's), filled on the GPU
// with the case's own content function; set 0's first two requests are
// spot-checked against the reference.
//   ctxscore_kernel_benchmark [--csv FILE] [--replays N] [--only NAME]
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
#include "ctxscore/case.hpp"
#include "ctxscore/compare.hpp"
#include "ctxscore/contents.hpp"
#include "ctxscore/harness/device.hpp"
#include "ctxscore/harness/graph_timing.hpp"
#include "ctxscore/harness/run_control.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "ctxscore/score.hpp"
#include "platform.hpp"

namespace ctxscore {
namespace {

using harness::DeviceBuffer;

// Pages [first_page, first_page + pages) of the cache hold the case's pages
// 0.. with seed `seed`: exactly what materialize() puts there.
__global__ void fill_cache(std::uint16_t* cache, std::int64_t first_page, std::int64_t pages, std::uint64_t seed) {
  const std::int64_t n = pages * kPageElems;
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    cache[first_page * kPageElems + e] = content_bits(seed, Stream::cache, static_cast<std::uint64_t>(e));
}
__global__ void fill_f32(float* p, std::int64_t n, float v) {
  for (std::int64_t e = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; e < n;
       e += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    p[e] = v;
}

// The launch floor's kernel: nothing to do, so its time per call in a graph
// is what launching and retiring the grid costs.
__global__ void empty_program() {}

// One row of the table: a registry case, run as the launcher chooses or
// with a forced geometry (the contract's chunking, or teams and ring pages).
struct Config {
  const harness::NamedCase* named;
  std::optional<GeometryOverride> forced;
  std::string geometry;  // "production", "contract", or the forced shape
};

struct Row {
  Config cfg;
  double us, bytes, gbps, fraction, launch_floor_us;
  std::int64_t grid_y, chunk;
  int teams, ring_pages, live_rows;
  std::string check;
};

// Reference spot check: the first min(B, 2) requests of set 0, their pages
// copied back from the GPU into a case of their own.
std::string spot_check(const Case& c, const float* out_dev, const std::uint16_t* cache_dev) {
  const std::int64_t b = std::min<std::int64_t>(c.batch(), 2), L = c.local(), G = c.global(), H = c.heads;
  const std::int64_t QL = c.query_len, T = c.tokens();
  Case sub = c;
  sub.name = c.name + "_spot_check";
  sub.seq_lens.resize(static_cast<std::size_t>(b));
  sub.pages = b * L;
  sub.block_table.assign(static_cast<std::size_t>(b * c.table_width), 0);
  sub.out_rows = sub.out_slots = sub.out_head_stride = sub.out_row_stride = sub.out_slot_stride = 0;
  std::vector<bf16> cache(static_cast<std::size_t>(sub.pages * kPageElems));
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < L; ++j) {
      const std::int64_t blk = block_of_slot(j, c.rank, c.world);
      if (blk >= G) continue;
      const std::int64_t page = clamp_page(c.block_table[static_cast<std::size_t>(i * c.table_width + blk)], c.pages);
      const std::int64_t local = i * L + j;
      sub.block_table[static_cast<std::size_t>(i * c.table_width + blk)] = static_cast<std::int32_t>(local);
      check_hip(hipMemcpy(cache.data() + local * kPageElems, cache_dev + page * kPageElems, kPageElems * 2,
                          hipMemcpyDeviceToHost), "spot page");
    }
  sub = sub.resolved();
  std::vector<bf16> q(static_cast<std::size_t>(b * QL * H * kHeadDim));
  for (std::size_t e = 0; e < q.size(); ++e)
    q[e] = Eigen::numext::bit_cast<bf16>(content_bits(c.seed, Stream::queries, e));
  HostCase h = lay_out(sub, q, std::move(cache));
  const std::vector<float> before = h.out;
  std::vector<float> full(static_cast<std::size_t>(H * T * L)), after(h.out.size());
  check_hip(hipMemcpy(full.data(), out_dev, full.size() * 4, hipMemcpyDeviceToHost), "spot out");
  for (std::int64_t hd = 0; hd < H; ++hd)
    for (std::int64_t r = 0; r < b * QL; ++r)
      std::memcpy(&after[static_cast<std::size_t>((hd * b * QL + r) * L)], &full[static_cast<std::size_t>((hd * T + r) * L)], L * 4);
  ScoreArgs args = h.args();
  args.out.reset();
  const ShardScores ref = score_shard(args);
  const CompareReport rep = compare(ref, h.out_layout(), before.data(), after.data(), static_cast<std::int64_t>(after.size()));
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s (%lld checked, ratio %.3g)", rep.ok() ? "ok" : "MISMATCH",
                static_cast<long long>(rep.written), rep.worst_ratio);
  if (!rep.ok()) std::fprintf(stderr, "spot check failed: %s\n", rep.summary().c_str());
  return buf;
}

Row measure(const Config& cfg, double copy_bps, hipStream_t s, int replays) {
  const Case& c = cfg.named->spec;
  const std::int64_t G = c.global(), L = c.local(), B = c.batch(), H = c.heads, T = c.tokens();
  std::int64_t read_pages = 0;
  for (std::int32_t len : c.seq_lens) read_pages += scan_slots(len, G, L, c.rank, c.world);
  const double bytes = static_cast<double>(read_pages) * kPageElems * 2 + static_cast<double>(T * H * kHeadDim * 2) +
                       static_cast<double>(H * T) * L * 4 + static_cast<double>(read_pages * 4 + B * 4);
  // Distinct input sets: 512 MiB of them, or 64 (always several times the 50 MiB L2).
  const int sets = static_cast<int>(std::clamp<double>(std::ceil(512.0 * (1 << 20) / bytes), 2, 64));
  DeviceBuffer cache(static_cast<std::size_t>(sets * c.pages) * kPageElems * 2);
  std::vector<DeviceBuffer> qs, tables, lens, outs;
  const float sentinel = c.sentinel;
  for (int k = 0; k < sets; ++k) {
    const std::uint64_t seed = c.seed + static_cast<std::uint64_t>(k);
    fill_cache<<<4096, 256, 0, s>>>(static_cast<std::uint16_t*>(cache.get()), k * c.pages, c.pages, seed);
    std::vector<std::uint16_t> q(static_cast<std::size_t>(T * H * kHeadDim));
    for (std::size_t e = 0; e < q.size(); ++e) q[e] = content_bits(seed, Stream::queries, e);
    std::vector<std::int32_t> table(c.block_table);
    for (std::int32_t& id : table) id = static_cast<std::int32_t>(clamp_page(id, c.pages) + k * c.pages);
    qs.emplace_back(q.size() * 2);
    tables.emplace_back(table.size() * 4);
    lens.emplace_back(c.seq_lens.size() * 4);
    outs.emplace_back(static_cast<std::size_t>(H * T * L) * 4);
    qs.back().upload(q.data(), q.size() * 2);
    tables.back().upload(table.data(), table.size() * 4);
    lens.back().upload(c.seq_lens.data(), c.seq_lens.size() * 4);
    fill_f32<<<1024, 256, 0, s>>>(static_cast<float*>(outs.back().get()), H * T * L, sentinel);
  }
  check_hip(hipDeviceSynchronize(), "fill");
  const Device gpu{Device::Kind::gpu, 0};
  std::vector<ScoreArgs> args;
  for (int k = 0; k < sets; ++k) {
    ScoreArgs a;
    a.idx_q = make_tensor(qs[k].get(), DType::bf16, gpu, {T, H, kHeadDim});
    a.index_cache = make_tensor(cache.get(), DType::bf16, gpu, {sets * c.pages, kBlockTokens, kHeadDim});
    a.block_table = make_strided(tables[k].get(), DType::i32, gpu, {B, c.table_width}, {c.table_row_stride, 1});
    a.seq_lens = make_tensor(lens[k].get(), DType::i32, gpu, {B});
    a.max_seq_len = c.max_seq_len;
    a.rank = c.rank;
    a.world = c.world;
    a.max_query_len = c.query_len;
    a.sm_scale = c.sm_scale;
    a.out = make_tensor(outs[k].get(), DType::f32, gpu, {H, T, L});
    args.push_back(a);
  }
  Geometry launched;
  int teams = 0, ring_pages = 0, live_rows = 0, threads = 0;
  const int calls = replays * harness::graph_calls(sets);
  const double us = harness::time_in_graph(s, sets, calls, [&](int k) {
                      const LaunchResult r = indexer_context_scores(args[static_cast<std::size_t>(k % sets)], s, cfg.forced);
                      launched = r.geometry;
                      teams = r.teams;
                      ring_pages = r.ring_pages;
                      live_rows = r.live_rows;
                      threads = r.threads;
                    }).median_us;
  // The same number of empty launches of the same grid and block size.
  const dim3 grid(static_cast<unsigned>(launched.grid_x), static_cast<unsigned>(launched.grid_y));
  const double floor_us = harness::time_in_graph(s, sets, calls, [&](int) { empty_program<<<grid, threads, 0, s>>>(); }).median_us;
  check_hip(hipStreamSynchronize(s), "replays");
  Row r{cfg, us, bytes, bytes / (us * 1e-6) * 1e-9, bytes / (us * 1e-6) / copy_bps, floor_us, launched.grid_y, launched.chunk, teams, ring_pages, live_rows, ""};
  r.check = spot_check(c, static_cast<const float*>(outs[0].get()), static_cast<const std::uint16_t*>(cache.get()));
  return r;
}

// The registry's benchmark cases as the launcher runs them, then the
// launcher's alternatives forced side by side: the contract's chunking for
// the small decode launches (which the launcher splits into one-slot
// programs); for the small launches two teams of two-page rings and
// one team of a one-page ring, for the others one team with either ring
// depth; and for speculative decode past one wave, one-page rings.
std::vector<Config> configs(const std::string& only) {
  std::vector<Config> v;
  std::vector<const harness::NamedCase*> bench;
  for (const harness::NamedCase& n : harness::named_cases())
    if (n.family == harness::CaseFamily::benchmark && (only.empty() || n.spec.name == only)) bench.push_back(&n);
  if (bench.empty()) throw std::invalid_argument("--only " + only + ": no benchmark case of that name (ctxscore cases)");
  for (const auto* n : bench) v.push_back({n, std::nullopt, "production"});
  for (const auto* n : bench) {
    const Case& c = n->spec;
    const Geometry g = launch_geometry(c.batch(), c.max_seq_len, c.world, c.heads, c.query_len);
    const bool decode = c.query_len == 1 && c.world == 4, small = c.batch() * c.max_seq_len <= 8 * 32768;
    if (decode && c.batch() * c.max_seq_len <= 8 * 131072 && c.batch() <= 8)
      v.push_back({n, GeometryOverride{g.chunk, g.grid_y, 0, 0}, "contract"});
    if (decode) {
      v.push_back({n, GeometryOverride{g.chunk, g.grid_y, small ? 2 : 1, small ? 2 : 1}, small ? "2x2!" : "1x1!"});
      v.push_back({n, GeometryOverride{g.chunk, g.grid_y, 1, small ? 1 : 2}, small ? "1x1!" : "1x2!"});
    }
    if (c.query_len == 4 && c.batch() * c.max_seq_len > 8 * 131072)
      v.push_back({n, GeometryOverride{g.chunk, g.grid_y, 1, 1}, "1x1!"});
  }
  return v;
}

}  // namespace
}  // namespace ctxscore

int main(int argc, char** argv) {
  using namespace ctxscore;
  std::string csv = "kernel_benchmark.csv", only;
  int replays = 200;
  for (int k = 1; k + 1 < argc; k += 2) {
    if (!std::strcmp(argv[k], "--csv")) csv = argv[k + 1];
    else if (!std::strcmp(argv[k], "--replays")) replays = std::max(100, std::atoi(argv[k + 1]));
    else if (!std::strcmp(argv[k], "--only")) only = argv[k + 1];
    else {
      std::fprintf(stderr, "unknown argument %s; usage: %s [--csv FILE] [--replays N>=100] [--only NAME]\n", argv[k], argv[0]);
      return 2;
    }
  }
  harness::apply_ctest_gpu_assignment();
  if (const std::string why = harness::gpu_absence_reason(); !why.empty()) {
    std::fprintf(stderr, "ctxscore_kernel_benchmark: %s\n", why.c_str());
    return 1;
  }
  try {
    hipStream_t s;
    check_hip(hipStreamCreate(&s), "stream");
    const double copy = harness::device_copy_gb_per_s(s) * 1e9;
    std::printf("device copy bandwidth (read + write): %.2f TB/s\n", copy * 1e-12);
    std::vector<Row> rows;
    for (const Config& cfg : configs(only)) {
      rows.push_back(measure(cfg, copy, s, replays));
      const Row& r = rows.back();
      std::fprintf(stderr, "measured %s %s teams=%d ring pages=%d live rows=%d: %.1f us, %s\n", cfg.named->spec.name.c_str(),
                   cfg.geometry.c_str(), r.teams, r.ring_pages, r.live_rows, r.us, r.check.c_str());
    }
    FILE* f = std::fopen(csv.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + csv);
    std::fprintf(f, "case,batch,context,heads,query_len,world,rank,geometry,chunk,grid_y,teams,ring_pages,live_rows,us_median,launch_floor_us,bytes,gbps,fraction_of_copy,copy_tbps,upstream_us,spot_check\n");
    for (const Row& r : rows) {
      const Case& c = r.cfg.named->spec;
      std::fprintf(f, "%s,%lld,%lld,%lld,%lld,%lld,%lld,%s,%lld,%lld,%d,%d,%d,%.3f,%.3f,%.0f,%.1f,%.4f,%.4f,%.1f,%s\n",
                   c.name.c_str(), (long long)c.batch(), (long long)c.max_seq_len, (long long)c.heads, (long long)c.query_len,
                   (long long)c.world, (long long)c.rank, r.cfg.geometry.c_str(), (long long)r.chunk, (long long)r.grid_y,
                   r.teams, r.ring_pages, r.live_rows, r.us, r.launch_floor_us, r.bytes, r.gbps, r.fraction, copy * 1e-12,
                   r.cfg.forced ? 0.0 : r.cfg.named->upstream_us, r.check.c_str());
    }
    std::fclose(f);
    std::printf("\n%-24s %-10s %6s %8s %10s %7s %10s %9s %8s %10s %8s  %s\n", "case", "geometry", "grid_y", "shape", "us",
                "launch", "MiB read", "GB/s", "of copy", "upstream", "speedup", "spot check");
    for (const Row& r : rows) {
      char up[16] = "-", sp[16] = "-";
      const double upstream = r.cfg.geometry == "production" ? r.cfg.named->upstream_us : 0;
      if (upstream > 0) {
        std::snprintf(up, sizeof up, "%.1f", upstream);
        std::snprintf(sp, sizeof sp, "%.2fx", upstream / r.us);
      }
      char tm[24];
      std::snprintf(tm, sizeof tm, "%dx%d/%d", r.teams, r.ring_pages, r.live_rows);
      std::printf("%-24s %-10s %6lld %8s %10.1f %7.1f %10.1f %9.0f %8.2f %10s %8s  %s\n", r.cfg.named->spec.name.c_str(),
                  r.cfg.geometry.c_str(), (long long)r.grid_y, tm, r.us, r.launch_floor_us, r.bytes / (1 << 20), r.gbps,
                  r.fraction, up, sp, r.check.c_str());
    }
    std::printf("shape: teams per program x pages per team's ring / query rows the score step reads; geometry:\n"
                "production (the launcher's choice), contract (its chunking, forced), or a forced shape (!); launch: us per call of an\n"
                "empty kernel of the same grid and block; raw numbers: %s\n",
                csv.c_str());
    for (const Row& r : rows)
      if (r.check.rfind("ok", 0) != 0) return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ctxscore_kernel_benchmark: %s\n", e.what());
    return 1;
  }
  return 0;
}
