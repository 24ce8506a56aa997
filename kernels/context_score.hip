// The score kernel and its launcher. One program per (request, chunk): it
// keeps its query tile resident in shared memory and streams one 32 KiB
// cache page per slot, with the next pages' loads in flight while the
// current one is scored. A program is one or more teams of kThreads
// threads that split its slots round-robin (page_stream.hpp). Addressing
// goes through address_plan.hpp, page streaming through page_stream.hpp, the
// matrix step through matrix_tile.hpp.
#include <cmath>
#include <stdexcept>
#include <utility>

#include "address_plan.hpp"
#include "context_score.hpp"
#include "matrix_tile.hpp"
#include "page_stream.hpp"

namespace ctxscore {

namespace {

using namespace tile;

// Query tile rows held in shared memory: active rows rounded up to 16.
CTXSCORE_HD inline std::int64_t staged_rows(std::int64_t heads, std::int64_t query_len) {
  return ceil_div(heads * query_len, 16) * 16;
}
// The shapes this platform's kernel has (page_stream.hpp).
inline constexpr KernelLimits kLimits{kMaxTeams, kMaxRingPages, teams_per_sm(1)};

// A program's dynamic shared memory, stated once: the launcher sizes it and
// the kernel carves it from this. In order: the teams' page rings (NVIDIA;
// page_stream.hpp), the query tile [rows][QueryLayout::kRowWords] u32, each
// tile row's causal cutoff (i32) and out offset at slot 0 (i64; 8-aligned,
// rows being a multiple of 16), and per team the waves' partial maxima of
// two slots [team][slot parity][wave][rows] f32.
struct SharedLayout {
  // Byte offsets; a program's shared memory is well under 2^31 bytes.
  int q_tile, cutoff, row_out, partial, bytes;
  int partial_per_team;  // floats
  CTXSCORE_HD constexpr SharedLayout(int teams, int ring_pages, int rows)
      : q_tile(teams * static_cast<int>(ring_bytes(ring_pages))),
        cutoff(q_tile + rows * QueryLayout::kRowWords * 4),
        row_out(cutoff + rows * 4),
        partial(row_out + rows * 8),
        bytes(partial + teams * 2 * kWaves * rows * 4),
        partial_per_team(2 * kWaves * rows) {}
};
std::size_t shared_bytes(std::int64_t rows, KernelShape k) {
  return static_cast<std::size_t>(SharedLayout(k.teams, k.ring_pages, static_cast<int>(rows)).bytes);
}

// The scores of one slot for every active row: the max over the waves'
// partial maxima, one thread of the team per row.
__device__ inline void store_slot(const ScoreParams& p, std::int64_t slot, const std::int64_t* row_out,
                                  const float* partial, int rows, int active, int tid) {
  for (int n = tid; n < active; n += kThreads) {
    float m = partial[n];
    for (int w = 1; w < kWaves; ++w) m = fmaxf(m, partial[w * rows + n]);
    p.out[out_slot_offset(p, row_out[n], slot)] = m;
  }
}

// Partial maxima of a team's slot j, [kWaves][rows], in the buffer of the
// parity of j / kTeams (the team's slots are kTeams apart).
template <int kTeams>
__device__ inline float* slot_partials(float* partial, std::int64_t j, int rows) {
  return partial + static_cast<int>((j / kTeams) & 1) * kWaves * rows;
}

// 16-byte chunk v of query tile row n (dims 8v .. 8v + 7); zero past H·QL.
__device__ inline uint4 query_chunk(const ScoreParams& p, std::int64_t request, int n, int v, int active) {
  if (n >= active) return make_uint4(0, 0, 0, 0);
  return reinterpret_cast<const uint4*>(p.q + tile_row_offset(p, request, n))[v];
}
// The thread's chunk of the query tile's first staging round (aligned rows).
__device__ inline uint4 first_query_chunk(const ScoreParams& p, std::int64_t request) {
  const int k = static_cast<int>(threadIdx.x), rows = static_cast<int>(staged_rows(p.heads, p.query_len));
  if (!p.q_rows_aligned || k >= rows * 16) return make_uint4(0, 0, 0, 0);
  return query_chunk(p, request, k / 16, k % 16, static_cast<int>(tile_active_rows(p)));
}

// kTeams teams of kThreads threads, each with a ring of kRingPages pages;
// the SM holds teams_per_sm(kRingPages) teams at the register budget their
// rings are sized for, however they are grouped. kLiveRows is 4 or 8 when
// the query tile is one m-tile with at most that many live rows (H·QL ≤ 4
// or ≤ 8), else 16.
template <int kTeams, int kRingPages, int kLiveRows>
__global__ __launch_bounds__(kThreads* kTeams, teams_per_sm(kRingPages) / kTeams) void context_score_kernel(ScoreParams p) {
  static_assert(shape_supported({kTeams, kRingPages}, kLimits), "the program's rings fit one SM");
  extern __shared__ uint4 smem[];
  const std::int64_t request = blockIdx.x;
  const int team = kTeams == 1 ? 0 : static_cast<int>(threadIdx.x) / kThreads;
  const std::int64_t first = team_first_slot(p, blockIdx.y, team);
  // With several teams, the query tile's first round of loads flies with
  // the page ids and the length: three memory latencies at the start become
  // one. The one-team kernel, at its register cap, loads it after.
  uint4 q0 = make_uint4(0, 0, 0, 0);
  if constexpr (kTeams > 1) q0 = first_query_chunk(p, request);
  PageStream<kTeams, kRingPages> pages(smem, p, request, first, team);
  const std::int64_t len = p.lens[request];
  const SlotRange range = program_range(p, blockIdx.y, len);
  if (range.empty()) return;
  pages.begin(range);  // the first pages' loads fly while the query tile is staged

  // Tile rows fit one program's shared memory (the launcher checks), so
  // int; registers are what bound the programs per SM.
  const int rows = static_cast<int>(staged_rows(p.heads, p.query_len));
  const int active = static_cast<int>(tile_active_rows(p));
  const int all = static_cast<int>(blockDim.x), k0 = static_cast<int>(threadIdx.x);

  const SharedLayout shared(kTeams, kRingPages, rows);
  char* const base = reinterpret_cast<char*>(smem);
  std::uint32_t* q_tile = reinterpret_cast<std::uint32_t*>(base + shared.q_tile);
  // Cutoffs lie in (−QL, len], lengths are int32: 32 bits.
  std::int32_t* cutoff = reinterpret_cast<std::int32_t*>(base + shared.cutoff);
  std::int64_t* row_out = reinterpret_cast<std::int64_t*>(base + shared.row_out);
  float* partial = reinterpret_cast<float*>(base + shared.partial) + team * shared.partial_per_team;  // this team's [parity][wave][rows]
  const int tid = static_cast<int>(threadIdx.x) % kThreads, lane = tid % kWave, wave = tid / kWave;

  // Every team stages the tile together, in the MMA steps' word order
  // (matrix_tile.hpp); rows past H·QL are zero and never stored. Free
  // strides need not keep rows 16-byte aligned: such launches load by pairs.
  if (p.q_rows_aligned) {
    for (int k = k0; k < rows * 16; k += all) {
      const int n = k / 16, v = k % 16;
      const uint4 x = kTeams > 1 && k == k0 ? q0 : query_chunk(p, request, n, v, active);
      // Words 4v, 4v + 1 and 4v + 2, 4v + 3 are pairs of one step each.
      std::uint32_t* row = q_tile + n * QueryLayout::kRowWords;
      *reinterpret_cast<uint2*>(row + QueryLayout::tile_word(4 * v)) = make_uint2(x.x, x.y);
      *reinterpret_cast<uint2*>(row + QueryLayout::tile_word(4 * v + 2)) = make_uint2(x.z, x.w);
    }
  } else {
    for (int k = k0; k < rows * kRowWords; k += all) {
      const int n = k / kRowWords, w = k % kRowWords;
      std::uint32_t x = 0;
      if (n < active) {
        const std::uint16_t* src = p.q + tile_row_offset(p, request, n) + 2 * w;
        x = static_cast<std::uint32_t>(src[0]) | (static_cast<std::uint32_t>(src[1]) << 16);
      }
      q_tile[n * QueryLayout::kRowWords + QueryLayout::tile_word(w)] = x;
    }
  }
  // The row's address arithmetic (64-bit divisions by H) once per program,
  // not once per slot.
  for (int n = k0; n < rows; n += all) {
    cutoff[n] = static_cast<std::int32_t>(tile_row_cutoff(p, len, n));
    row_out[n] = n < active ? out_row_offset(p, request, n) : 0;
  }
  __syncthreads();  // the staged tile is every team's
  if (first >= range.last) return;  // a team past a short range scores nothing

  // The maxima of the team's previous slot are stored at the end of the
  // iteration of slot j (advance(j)'s barrier made them visible) while slot
  // j's are being written: they are double-buffered by parity, which needs
  // no barrier beyond advance's (release's is NVIDIA's alone).
  const int m_tiles = rows / 16;
  std::int64_t j = first;
  for (; j < range.last; j += kTeams) {
    pages.advance(j);  // the team's barrier: page j and the previous slot's maxima are visible to it
    float* part = slot_partials<kTeams>(partial, j, rows);
    const auto page = [&](int t, int v) { return pages.fragment(j, wave, lane, t, v); };
    const std::int64_t block = slot_block(p, j);
    for (int mt = 0; mt < m_tiles; ++mt) {
      Accum acc[kTilesPerWave];
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
        for (int e = 0; e < kAccElems; ++e) acc[t].v[e] = 0.0f;
      mma_tiles<kLiveRows>(acc, q_tile, mt, lane, page);
      // Limits lie in [0, 128]: 32 bits (registers are what bound the
      // programs per SM).
      int limit[kAccRows];
      float best[kAccRows];
#pragma unroll
      for (int r = 0; r < kAccRows; ++r) {
        limit[r] = static_cast<int>(block_limit(cutoff[mt * 16 + acc_row(lane, acc_row_element(r))], block));
        best[r] = -INFINITY;
      }
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
        for (int e = 0; e < kAccElems; ++e) {
          const int r = acc_row_index(e);
          const int pos = tile_first_position(wave, t) + acc_position(lane, e);
          best[r] = fmaxf(best[r], pos < limit[r] ? acc[t].v[e] * p.scale : -INFINITY);
        }
#pragma unroll
      for (int r = 0; r < kAccRows; ++r) {
        if (!acc_rows_live(r, kLiveRows)) continue;  // padding rows are never stored
        float m = best[r];
#pragma unroll
        for (int mask = 1; mask < kRowPeerSpan; mask <<= 1) m = fmaxf(m, shfl_xor(m, mask));
        if (row_leader(lane)) part[wave * rows + mt * 16 + acc_row(lane, acc_row_element(r))] = m;
      }
    }
    pages.release(j);  // the team has read page j
    if (j > first) store_slot(p, j - kTeams, row_out, slot_partials<kTeams>(partial, j - kTeams, rows), rows, active, tid);
  }
  team_barrier(team);
  j -= kTeams;  // the team's last slot
  store_slot(p, j, row_out, slot_partials<kTeams>(partial, j, rows), rows, active, tid);
}

// The kernel instance of a supported shape (teams 1..kMaxTeams with
// one-page rings, and 1..kMaxTeams / 2 with two-page ones) for a query tile
// of at most 4, at most 8, or more live rows.
using KernelFn = void (*)(ScoreParams);
template <int kTeams, int kRingPages, int kLiveRows>
constexpr KernelFn kernel_if_supported() {
  if constexpr (shape_supported({kTeams, kRingPages}, kLimits))
    return &context_score_kernel<kTeams, kRingPages, kLiveRows>;
  else
    return nullptr;
}
template <int kLiveRows, std::size_t... I>
KernelFn kernel_of(KernelShape k, std::index_sequence<I...>) {
  constexpr KernelFn one_page[] = {kernel_if_supported<static_cast<int>(I) + 1, 1, kLiveRows>()...};
  constexpr KernelFn two_pages[] = {kernel_if_supported<static_cast<int>(I) + 1, 2, kLiveRows>()...};
  return (k.ring_pages == 1 ? one_page : two_pages)[k.teams - 1];
}
KernelFn kernel_of(KernelShape k, int live_rows) {
  const auto teams = std::make_index_sequence<kMaxTeams>{};
  return live_rows == 4 ? kernel_of<4>(k, teams) : live_rows == 8 ? kernel_of<8>(k, teams) : kernel_of<16>(k, teams);
}

int device_attribute(hipDeviceAttribute_t what, const char* name) {
  int device = 0, value = 0;
  check_hip(hipGetDevice(&device), "hipGetDevice");
  check_hip(hipDeviceGetAttribute(&value, what, device), name);
  return value;
}
std::size_t shared_limit() {
  return static_cast<std::size_t>(device_attribute(CTXSCORE_SHARED_LIMIT_ATTR, "hipDeviceGetAttribute(shared memory)"));
}
// The launch's teams and ring depth: the launcher's choice, or a test's
// (GeometryOverride). A forced value is checked, never adjusted; the other
// one, left to the kernel, is the largest that fits beside it.
KernelShape kernel_shape(const Geometry& g, std::int64_t rows, int live_rows, int sms,
                         const std::optional<GeometryOverride>& geometry) {
  const KernelLimits& lim = kLimits;
  const std::size_t smem_limit = shared_limit();
  const std::int64_t forced_teams = geometry ? geometry->teams : 0, forced_ring = geometry ? geometry->ring_pages : 0;
  if (forced_teams < 0 || forced_teams > lim.most_teams)
    throw ContractError(Clause::geometry_override, "geometry.teams: got " + std::to_string(forced_teams) +
                                                       ", expected 0 (the kernel's choice) or 1.." + std::to_string(lim.most_teams));
  if (forced_ring < 0 || forced_ring > lim.most_ring_pages)
    throw ContractError(Clause::geometry_override, "geometry.ring_pages: got " + std::to_string(forced_ring) +
                                                       ", expected 0 (the kernel's choice) or 1.." +
                                                       std::to_string(lim.most_ring_pages));
  if (forced_teams != 0 && forced_ring != 0 && !shape_supported({int(forced_teams), int(forced_ring)}, lim))
    throw ContractError(Clause::geometry_override,
                        "geometry.teams: got " + std::to_string(forced_teams) + " with geometry.ring_pages " +
                            std::to_string(forced_ring) + ", expected teams * ring pages <= " +
                            std::to_string(lim.most_teams) + " (a program's rings share one multiprocessor)");
  KernelShape k = choose_kernel_shape(g.grid_x * g.grid_y, g.chunk, live_rows, sms, lim);
  if (forced_teams != 0) k.teams = static_cast<int>(forced_teams);
  if (forced_ring != 0) k.ring_pages = static_cast<int>(forced_ring);
  // Fit the unforced one: first beside the forced one, then in shared memory.
  const auto fits = [&] { return shape_supported(k, lim) && shared_bytes(rows, k) <= smem_limit; };
  while (!fits() && forced_ring == 0 && k.ring_pages > 1) --k.ring_pages;
  while (!fits() && forced_teams == 0 && k.teams > 1) --k.teams;
  if (!fits())
    throw ContractError(Clause::geometry_override,
                        "geometry.teams: got " + std::to_string(k.teams) + " with geometry.ring_pages " +
                            std::to_string(k.ring_pages) + ", expected a shape whose page rings and " +
                            std::to_string(rows) + "-row query tile fit " + std::to_string(smem_limit) +
                            " bytes of shared memory");
  return k;
}
}  // namespace

DeviceScores::DeviceScores(DeviceScores&& o) noexcept
    : data(std::exchange(o.data, nullptr)), heads(o.heads), tokens(o.tokens), slots(o.slots) {}
DeviceScores& DeviceScores::operator=(DeviceScores&& o) noexcept {
  std::swap(data, o.data);
  heads = o.heads;
  tokens = o.tokens;
  slots = o.slots;
  return *this;
}
DeviceScores::~DeviceScores() {
  if (data) (void)hipFree(data);
}

std::int64_t max_tile_rows() {
  const KernelShape least{1, 1};
  const std::size_t limit = shared_limit(), fixed = shared_bytes(0, least), per_row = shared_bytes(1, least) - fixed;
  if (limit < fixed) return 0;
  return static_cast<std::int64_t>((limit - fixed) / per_row) / 16 * 16;
}

int max_teams() { return kMaxTeams; }
int max_ring_pages() { return kMaxRingPages; }

LaunchResult indexer_context_scores(const ScoreArgs& args, hipStream_t stream,
                                    const std::optional<GeometryOverride>& geometry) {
  const Layout layout = validate(args);
  if (args.idx_q.device.kind != Device::Kind::gpu)
    throw ContractError(Clause::same_device, "idx_q: got device " + args.idx_q.device.str() + ", expected a GPU tensor");
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  check_hip(hipStreamIsCapturing(stream, &status), "hipStreamIsCapturing");
  const OutDecision decision = decide_out(args, layout, status != hipStreamCaptureStatusNone);

  LaunchResult result;
  const int sms = device_attribute(hipDeviceAttributeMultiprocessorCount, "hipDeviceGetAttribute(multiprocessors)");
  result.geometry = geometry ? apply_override(layout.geometry, *geometry) : choose_chunking(layout.geometry, sms, kLimits);
  const Geometry& g = result.geometry;
  if (g.grid_y > 65535)
    throw ContractError(Clause::geometry_override,
                        "geometry.grid_y: got " + std::to_string(g.grid_y) + ", expected <= 65535 (grid y limit)");
  const std::int64_t rows = staged_rows(layout.heads, args.max_query_len);
  if (const std::int64_t most = max_tile_rows(); rows > most)
    throw ContractError(Clause::heads, "idx_q: heads * max_query_len = " + std::to_string(layout.heads * args.max_query_len) +
                                           ", expected <= " + std::to_string(most) +
                                           " (the query tile must fit one program's shared memory)");
  const int live_rows = live_tile_rows(layout.heads * args.max_query_len);
  const KernelShape k = kernel_shape(g, rows, live_rows, sms, geometry);
  result.teams = k.teams;
  result.ring_pages = k.ring_pages;
  result.live_rows = live_rows;
  result.threads = kThreads * k.teams;
  const std::size_t smem = shared_bytes(rows, k);

  ScoreParams p = make_score_params(args, layout, g);
  result.used_given_out = decision.use_given;
  if (!decision.use_given) {
    result.fresh_reason = decision.fresh_reason;
    DeviceScores& f = result.fresh;
    f.heads = layout.heads;
    f.tokens = layout.tokens;
    f.slots = g.local;
    const std::size_t elems = static_cast<std::size_t>(f.heads * f.tokens * f.slots);
    if (elems > 0) check_hip(hipMalloc(reinterpret_cast<void**>(&f.data), elems * sizeof(float)), "hipMalloc(out)");
    p.out = f.data;
    p.out_head_stride = f.tokens * f.slots;
    p.out_row_stride = f.slots;
    p.out_slot_stride = 1;
  }
  if (layout.tokens == 0) return result;  // T = 0 launches nothing

  const KernelFn kernel = kernel_of(k, live_rows);
  if (smem > 48 * 1024)
    check_hip(hipFuncSetAttribute(reinterpret_cast<const void*>(kernel), hipFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(smem)),
              "hipFuncSetAttribute(shared memory)");
  const dim3 grid(static_cast<unsigned>(g.grid_x), static_cast<unsigned>(g.grid_y));
  kernel<<<grid, result.threads, smem, stream>>>(p);
  check_hip(hipGetLastError(), "context_score_kernel launch");
  result.launched = true;
  return result;
}

std::string kernel_toolchain() {
#if defined(__CUDACC__)
  const std::string compiler = "nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." + std::to_string(__CUDACC_VER_MINOR__);
#else
  const std::string compiler = "hipcc (HIP " + std::to_string(HIP_VERSION_MAJOR) + "." + std::to_string(HIP_VERSION_MINOR) + ")";
#endif
  return "kernel built by " + compiler + "; " + runtime_description();
}

}  // namespace ctxscore
