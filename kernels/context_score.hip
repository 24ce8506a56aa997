// The score kernel and its launcher. One program per (request, chunk): it
// keeps its query tile resident in shared memory and streams one 32 KiB
// cache page per slot, with the next pages' loads in flight while the
// current one is scored. Addressing goes through address_plan.hpp, page
// streaming through page_stream.hpp, the matrix step through matrix_tile.hpp.
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
// Dynamic shared memory: the page ring (NVIDIA), then the query tile and
// each wave's partial maxima.
std::size_t shared_bytes(std::int64_t rows) {
  return kRingBytes + static_cast<std::size_t>(rows) * (kSmemRowWords * 4 + kWaves * 4);
}

#if defined(CTXSCORE_PLATFORM_CUDA)
#define CTXSCORE_PROGRAMS_PER_SM 2  // two programs' page rings fill one SM's shared memory
#else
#define CTXSCORE_PROGRAMS_PER_SM 1
#endif

__global__ __launch_bounds__(kThreads, CTXSCORE_PROGRAMS_PER_SM) void context_score_kernel(ScoreParams p) {
  const std::int64_t request = blockIdx.x;
  const std::int64_t len = p.lens[request];
  const SlotRange range = program_range(p, blockIdx.y, len);
  if (range.empty()) return;

  extern __shared__ uint4 smem[];
  const std::int64_t rows = staged_rows(p.heads, p.query_len);
  uint4* ring = smem;
  std::uint32_t* q_tile = reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(smem) + kRingBytes);  // [rows][kSmemRowWords]
  float* partial = reinterpret_cast<float*>(q_tile + rows * kSmemRowWords);  // [kWaves][rows]
  const int tid = threadIdx.x, lane = tid % kWave, wave = tid / kWave;

  PageStream pages(ring, p, request, range);
  pages.begin();  // the first pages' loads fly while the query tile is staged

  // Stage the query tile; rows past H·QL are zero and never stored. Free
  // strides need not keep rows 16-byte aligned: such launches load by pairs.
  if (p.q_rows_aligned) {
    for (std::int64_t k = tid; k < rows * 16; k += kThreads) {
      const std::int64_t n = k / 16, v = k % 16;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (tile_row_active(p, n)) x = reinterpret_cast<const uint4*>(p.q + tile_row_offset(p, request, n))[v];
      reinterpret_cast<uint4*>(q_tile + n * kSmemRowWords)[v] = x;
    }
  } else {
    for (std::int64_t k = tid; k < rows * kRowWords; k += kThreads) {
      const std::int64_t n = k / kRowWords, w = k % kRowWords;
      std::uint32_t x = 0;
      if (tile_row_active(p, n)) {
        const std::uint16_t* src = p.q + tile_row_offset(p, request, n) + 2 * w;
        x = static_cast<std::uint32_t>(src[0]) | (static_cast<std::uint32_t>(src[1]) << 16);
      }
      q_tile[n * kSmemRowWords + w] = x;
    }
  }

  const std::int64_t m_tiles = rows / 16;
  for (std::int64_t j = range.first; j < range.last; ++j) {
    pages.advance(j);  // a barrier: the query tile and page j are visible to all
    const std::int64_t block = slot_block(p, j);
    for (std::int64_t mt = 0; mt < m_tiles; ++mt) {
      const QueryFrag a = load_query_frag(q_tile, static_cast<int>(mt), lane);
      float best[kAccRows];
#pragma unroll
      for (int r = 0; r < kAccRows; ++r) best[r] = -INFINITY;
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t) {
        uint4 b[4];
        pages.fragment(j, t, wave, lane, b);
        Accum acc;
#pragma unroll
        for (int e = 0; e < kAccElems; ++e) acc.v[e] = 0.0f;
        mma_page(acc, a, b);
        const int tile_pos = (wave * kTilesPerWave + t) * kTilePositions;
#pragma unroll
        for (int e = 0; e < kAccElems; ++e) {
          const std::int64_t n = mt * 16 + acc_row(lane, e);
          const std::int64_t pos = tile_pos + acc_position(lane, e);
          const float score = acc.v[e] * p.scale;
          if (pos < tile_row_limit(p, len, n, block)) best[acc_row_index(e)] = fmaxf(best[acc_row_index(e)], score);
        }
      }
#pragma unroll
      for (int r = 0; r < kAccRows; ++r) {
        float m = best[r];
#pragma unroll
        for (int mask = 1; mask < kRowPeerSpan; mask <<= 1) m = fmaxf(m, shfl_xor(m, mask));
        if (row_leader(lane)) partial[wave * rows + mt * 16 + acc_row(lane, acc_row_element(r))] = m;
      }
    }
    __syncthreads();
    for (std::int64_t n = tid; n < rows; n += kThreads) {
      if (!tile_row_active(p, n)) continue;
      float m = partial[n];
      for (int w = 1; w < kWaves; ++w) m = fmaxf(m, partial[w * rows + n]);
      p.out[out_offset(p, request, n, j)] = m;
    }
  }
}

void check_hip(hipError_t e, const char* what) {
  if (e != hipSuccess) throw std::runtime_error(std::string(what) + ": " + hipGetErrorString(e));
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
  int device = 0, limit = 0;
  check_hip(hipGetDevice(&device), "hipGetDevice");
  check_hip(hipDeviceGetAttribute(&limit, CTXSCORE_SHARED_LIMIT_ATTR, device), "hipDeviceGetAttribute(shared memory)");
  const std::size_t fixed = shared_bytes(0), per_row = shared_bytes(1) - fixed;
  if (static_cast<std::size_t>(limit) < fixed) return 0;
  return static_cast<std::int64_t>((static_cast<std::size_t>(limit) - fixed) / per_row) / 16 * 16;
}

LaunchResult indexer_context_scores(const ScoreArgs& args, hipStream_t stream,
                                    const std::optional<GeometryOverride>& geometry) {
  const Layout layout = validate(args);
  if (args.idx_q.device.kind != Device::Kind::gpu)
    throw ContractError(Clause::same_device, "idx_q: got device " + args.idx_q.device.str() + ", expected a GPU tensor");
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  check_hip(hipStreamIsCapturing(stream, &status), "hipStreamIsCapturing");
  const OutDecision decision = decide_out(args, layout, status != hipStreamCaptureStatusNone);

  LaunchResult result;
  result.geometry = geometry ? apply_override(layout.geometry, *geometry) : layout.geometry;
  const Geometry& g = result.geometry;
  if (g.grid_y > 65535)
    throw ContractError(Clause::geometry_override,
                        "geometry.grid_y: got " + std::to_string(g.grid_y) + ", expected <= 65535 (grid y limit)");
  const std::int64_t rows = staged_rows(layout.heads, args.max_query_len);
  const std::size_t smem = shared_bytes(rows);
  if (const std::int64_t most = max_tile_rows(); rows > most)
    throw ContractError(Clause::heads, "idx_q: heads * max_query_len = " + std::to_string(layout.heads * args.max_query_len) +
                                           ", expected <= " + std::to_string(most) +
                                           " (the query tile must fit one program's shared memory)");

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

  if (smem > 48 * 1024)
    check_hip(hipFuncSetAttribute(reinterpret_cast<const void*>(&context_score_kernel),
                                  hipFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
              "hipFuncSetAttribute(shared memory)");
  const dim3 grid(static_cast<unsigned>(g.grid_x), static_cast<unsigned>(g.grid_y));
  context_score_kernel<<<grid, kThreads, smem, stream>>>(p);
  check_hip(hipGetLastError(), "context_score_kernel launch");
  result.launched = true;
  return result;
}

}  // namespace ctxscore
