// The matrix-unit step of the kernel, the one part where the two platforms
// differ in hardware: NVIDIA mma.sync m16n8k16 (warp of 32) and AMD MFMA
// 16x16x16 bf16 (wavefront of 64), side by side.
//
// Both work on a 16-row query tile and one n-tile of page positions. Each
// lane loads one position row's 64-byte chunk (32 dims) of the page straight
// into registers. The dot product does not care in which order dims are
// summed, so the k index of each MMA step is mapped to dims so that a lane's
// B registers are that contiguous chunk: step s, lane chunk c covers dims
// 32c + 4s .. 32c + 4s + 3. A (the queries) uses the same mapping.
#pragma once

#include <cstdint>

#include "platform.hpp"

namespace ctxscore::tile {

inline constexpr int kThreads = 256;
inline constexpr int kWave = CTXSCORE_WAVE;
inline constexpr int kWaves = kThreads / kWave;
inline constexpr int kRowWords = 64;            // u32 words (bf16 pairs) per 128-dim row
inline constexpr int kSteps = 8;                // 8 MMA steps of k = 16 over 128 dims

// The query tile in shared memory. Word w of a row (dims 2w, 2w + 1) is read
// by lane chunk c = w / 16 at MMA step s = w % 16 / 2; a step reads two
// words per lane. Rows are stored step-major: step s's words of chunks 0..3
// side by side, rows 72 words apart (288 B, 32 past a multiple of 128), so
// the sixteen lanes of each 8-byte read phase (four rows) hit 32 distinct
// banks. (In the row's own, chunk-major order a step's reads hit each bank
// twice: chunks 0 and 2 share banks.)
struct QueryLayout {
  static constexpr int kRowWords = 72;
  __device__ static constexpr int step_word(int chunk, int step) { return step * 8 + 2 * chunk; }
  __device__ static constexpr int tile_word(int w) { return step_word(w / 16, w % 16 / 2) + w % 2; }
};

#if defined(CTXSCORE_PLATFORM_CUDA)

inline constexpr int kTilePositions = 8;  // n of m16n8k16
inline constexpr int kTilesPerWave = 128 / kTilePositions / kWaves;  // n-tiles of a page per wave
// Lane roles: which position row it loads (within the n-tile) and which 32-dim chunk.
__device__ inline int lane_position(int lane) { return lane >> 2; }
__device__ inline int lane_chunk(int lane) { return lane & 3; }

struct Accum {
  float v[4];  // (row g, pos 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
};

// One step's two query words, read where the step runs rather than all
// sixteen hoisted ahead of the loop and held in registers at once. The
// address is a 32-bit shared one: a row's base plus constants per step.
__device__ inline uint2 load_step(unsigned addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr) : "memory");
  return v;
}
// The same in lanes where `read` holds, zeros without a read elsewhere.
__device__ inline uint2 load_step_if(bool read, unsigned addr) {
  uint2 v;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %3, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
      " @p ld.shared.v2.u32 {%0, %1}, [%2];\n}\n"
      : "=r"(v.x), "=r"(v.y)
      : "r"(addr), "r"(static_cast<int>(read))
      : "memory");
  return v;
}

__device__ inline std::uint32_t word(const uint4& chunk, int w) {
  return w == 0 ? chunk.x : w == 1 ? chunk.y : w == 2 ? chunk.z : chunk.w;
}

// acc[t] += Q(16 rows of m-tile m) · K(n-tile t)ᵀ for each of the wave's
// n-tiles, step by step over the 128 dims. Operands are read where their
// step runs, so few are live at once (the register budget holds four teams
// per SM): a step's query words, and every second step the page's 16-byte
// chunk per n-tile, `page(t, v)` (the lane's chunk v of n-tile t).
// kLiveRows: 16, or 8 or 4 when the tile is one m-tile whose rows from
// there on are padding (M3 decode: 4 heads, 1 token). Padding rows' words
// are zero, not read: a step's shared-memory reads shrink with them.
template <int kLiveRows, class Page>
__device__ inline void mma_tiles(Accum* acc, const std::uint32_t* q_tile, int m, int lane, const Page& page) {
  static_assert(kLiveRows == 4 || kLiveRows == 8 || kLiveRows == 16, "a full tile, or 8 or 4 live rows");
  const int g = lane >> 2, c = lane & 3;
  const bool lo_live = kLiveRows >= 8 || g < kLiveRows;  // lanes of padding rows skip the read
  uint4 b[kTilesPerWave];  // the current chunk of each n-tile: steps 2v and 2v + 1
  // Row g at the lane's chunk; row g + 8 and each step add constants.
  const unsigned r0 =
      static_cast<unsigned>(__cvta_generic_to_shared(q_tile + (m * 16 + g) * QueryLayout::kRowWords + QueryLayout::step_word(c, 0)));
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s % 2 == 0)
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t) b[t] = page(t, s / 2);
    const uint2 lo = kLiveRows >= 8 ? load_step(r0 + 4 * QueryLayout::step_word(0, s))
                                    : load_step_if(lo_live, r0 + 4 * QueryLayout::step_word(0, s));
    uint2 hi = make_uint2(0u, 0u);
    if constexpr (kLiveRows > 8) hi = load_step(r0 + 4 * (QueryLayout::step_word(0, s) + 8 * QueryLayout::kRowWords));
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      const uint4& chunk = b[t];
      const std::uint32_t b0 = word(chunk, 2 * (s & 1)), b1 = word(chunk, 2 * (s & 1) + 1);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(acc[t].v[0]), "+f"(acc[t].v[1]), "+f"(acc[t].v[2]), "+f"(acc[t].v[3])
          : "r"(lo.x), "r"(hi.x), "r"(lo.y), "r"(hi.y), "r"(b0), "r"(b1));
    }
  }
}

// Row (within the 16-row tile) and position (within the n-tile) of accumulator element e.
__device__ inline int acc_row(int lane, int e) { return (lane >> 2) + (e >= 2 ? 8 : 0); }
__device__ inline int acc_position(int lane, int e) { return 2 * (lane & 3) + (e & 1); }
inline constexpr int kAccRows = 2;  // distinct rows per lane: g and g + 8
__device__ inline int acc_row_index(int e) { return e >> 1; }  // which of them element e holds
__device__ inline int acc_row_element(int r) { return 2 * r; }  // an element holding row index r
// Whether row index r is a live row in some lane of the wave when only the
// tile's first kLiveRows rows are.
__device__ constexpr bool acc_rows_live(int r, int live_rows) { return 8 * r < live_rows; }
// Lanes holding the same rows differ only in the lane bits below this span.
inline constexpr int kRowPeerSpan = 4;
__device__ inline bool row_leader(int lane) { return (lane & 3) == 0; }

#else  // AMD MFMA

inline constexpr int kTilePositions = 16;
inline constexpr int kTilesPerWave = 128 / kTilePositions / kWaves;
__device__ inline int lane_position(int lane) { return lane & 15; }
__device__ inline int lane_chunk(int lane) { return lane >> 4; }

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float floatx4_t __attribute__((ext_vector_type(4)));

struct Accum {
  floatx4_t v;  // pos = lane % 16, rows 4·(lane / 16) + e
};
// Step s's 4 dims of a lane's 64-byte chunk, as the MFMA operand.
__device__ inline bf16x4_t step_operand(uint2 w) {
  bf16x4_t r;
  r[0] = static_cast<short>(w.x & 0xFFFFu);
  r[1] = static_cast<short>(w.x >> 16);
  r[2] = static_cast<short>(w.y & 0xFFFFu);
  r[3] = static_cast<short>(w.y >> 16);
  return r;
}

// As on NVIDIA: query words read per step from shared memory, padding rows
// not at all; the page's chunks, `page(t, v)`, come from the lane's
// registers here.
template <int kLiveRows, class Page>
__device__ inline void mma_tiles(Accum* acc, const std::uint32_t* q_tile, int m, int lane, const Page& page) {
  static_assert(kLiveRows == 4 || kLiveRows == 8 || kLiveRows == 16, "a full tile, or 8 or 4 live rows");
  const std::uint32_t* r = q_tile + (m * 16 + (lane & 15)) * QueryLayout::kRowWords + QueryLayout::step_word(lane >> 4, 0);
  const bool row_live = (lane & 15) < kLiveRows;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const uint2 w = row_live ? *reinterpret_cast<const uint2*>(r + QueryLayout::step_word(0, s)) : make_uint2(0u, 0u);
    const bf16x4_t a = step_operand(w);
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      const uint4 chunk = page(t, s / 2);
      const uint2 w = (s & 1) ? make_uint2(chunk.z, chunk.w) : make_uint2(chunk.x, chunk.y);
      acc[t].v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, step_operand(w), acc[t].v, 0, 0, 0);
    }
  }
}

__device__ inline int acc_row(int lane, int e) { return 4 * (lane >> 4) + e; }
__device__ inline int acc_position(int lane, int) { return lane & 15; }
inline constexpr int kAccRows = 4;
__device__ inline int acc_row_index(int e) { return e; }
__device__ inline int acc_row_element(int r) { return r; }
__device__ constexpr bool acc_rows_live(int, int) { return true; }  // every index has rows 0..3 in lanes 0..15
inline constexpr int kRowPeerSpan = 16;
__device__ inline bool row_leader(int lane) { return (lane & 15) == 0; }

#endif

inline constexpr int kAccElems = sizeof(Accum::v) / sizeof(float);
// First page position of n-tile t of a wave.
__device__ inline int tile_first_position(int wave, int t) { return (wave * kTilesPerWave + t) * kTilePositions; }
static_assert(kTilesPerWave * kTilePositions * kWaves == 128, "a page's positions split evenly over the waves");
static_assert(kWave * 64 * kTilesPerWave * kWaves == 32768, "each lane loads 64 B per n-tile: one 32 KiB page");

}  // namespace ctxscore::tile
