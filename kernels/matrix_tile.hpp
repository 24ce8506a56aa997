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
inline constexpr int kSmemRowWords = kRowWords + 4;  // +16 B per row against bank conflicts
inline constexpr int kSteps = 8;                // 8 MMA steps of k = 16 over 128 dims

#if defined(CTXSCORE_PLATFORM_CUDA)

inline constexpr int kTilePositions = 8;  // n of m16n8k16
// Lane roles: which position row it loads (within the n-tile) and which 32-dim chunk.
__device__ inline int lane_position(int lane) { return lane >> 2; }
__device__ inline int lane_chunk(int lane) { return lane & 3; }

struct Accum {
  float v[4];  // (row g, pos 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
};
struct QueryFrag {
  uint4 lo[4], hi[4];  // rows g and g+8: the lane's 64-byte chunk of each
};

__device__ inline QueryFrag load_query_frag(const std::uint32_t* q_tile, int m_tile, int lane) {
  QueryFrag f;
  const int g = lane >> 2, c = lane & 3;
  const std::uint32_t* r0 = q_tile + (m_tile * 16 + g) * kSmemRowWords + 16 * c;
  const std::uint32_t* r1 = r0 + 8 * kSmemRowWords;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    f.lo[v] = reinterpret_cast<const uint4*>(r0)[v];
    f.hi[v] = reinterpret_cast<const uint4*>(r1)[v];
  }
  return f;
}

__device__ inline std::uint32_t word(const uint4* chunk, int w) {
  const uint4 x = chunk[w >> 2];
  const int k = w & 3;
  return k == 0 ? x.x : k == 1 ? x.y : k == 2 ? x.z : x.w;
}

// acc += Q(16 × 128) · K(positions of this n-tile)ᵀ over all 8 steps.
__device__ inline void mma_page(Accum& acc, const QueryFrag& a, const uint4* b) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const std::uint32_t a0 = word(a.lo, 2 * s), a1 = word(a.hi, 2 * s);
    const std::uint32_t a2 = word(a.lo, 2 * s + 1), a3 = word(a.hi, 2 * s + 1);
    const std::uint32_t b0 = word(b, 2 * s), b1 = word(b, 2 * s + 1);
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(acc.v[0]), "+f"(acc.v[1]), "+f"(acc.v[2]), "+f"(acc.v[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  }
}

// Row (within the 16-row tile) and position (within the n-tile) of accumulator element e.
__device__ inline int acc_row(int lane, int e) { return (lane >> 2) + (e >= 2 ? 8 : 0); }
__device__ inline int acc_position(int lane, int e) { return 2 * (lane & 3) + (e & 1); }
inline constexpr int kAccRows = 2;  // distinct rows per lane: g and g + 8
__device__ inline int acc_row_index(int e) { return e >> 1; }  // which of them element e holds
__device__ inline int acc_row_element(int r) { return 2 * r; }  // an element holding row index r
// Lanes holding the same rows differ only in the lane bits below this span.
inline constexpr int kRowPeerSpan = 4;
__device__ inline bool row_leader(int lane) { return (lane & 3) == 0; }

#else  // AMD MFMA

inline constexpr int kTilePositions = 16;
__device__ inline int lane_position(int lane) { return lane & 15; }
__device__ inline int lane_chunk(int lane) { return lane >> 4; }

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float floatx4_t __attribute__((ext_vector_type(4)));

struct Accum {
  floatx4_t v;  // pos = lane % 16, rows 4·(lane / 16) + e
};
struct QueryFrag {
  uint4 row[4];  // row lane % 16: the lane's 64-byte chunk
};

__device__ inline QueryFrag load_query_frag(const std::uint32_t* q_tile, int m_tile, int lane) {
  QueryFrag f;
  const std::uint32_t* r = q_tile + (m_tile * 16 + (lane & 15)) * kSmemRowWords + 16 * (lane >> 4);
#pragma unroll
  for (int v = 0; v < 4; ++v) f.row[v] = reinterpret_cast<const uint4*>(r)[v];
  return f;
}

__device__ inline bf16x4_t step_operand(const uint4* chunk, int s) {
  const uint4 x = chunk[s >> 1];
  const unsigned lo = (s & 1) ? x.z : x.x, hi = (s & 1) ? x.w : x.y;
  bf16x4_t r;
  r[0] = static_cast<short>(lo & 0xFFFFu);
  r[1] = static_cast<short>(lo >> 16);
  r[2] = static_cast<short>(hi & 0xFFFFu);
  r[3] = static_cast<short>(hi >> 16);
  return r;
}

__device__ inline void mma_page(Accum& acc, const QueryFrag& a, const uint4* b) {
#pragma unroll
  for (int s = 0; s < kSteps; ++s)
    acc.v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(step_operand(a.row, s), step_operand(b, s), acc.v, 0, 0, 0);
}

__device__ inline int acc_row(int lane, int e) { return 4 * (lane >> 4) + e; }
__device__ inline int acc_position(int lane, int) { return lane & 15; }
inline constexpr int kAccRows = 4;
__device__ inline int acc_row_index(int e) { return e; }
__device__ inline int acc_row_element(int r) { return r; }
inline constexpr int kRowPeerSpan = 16;
__device__ inline bool row_leader(int lane) { return (lane & 15) == 0; }

#endif

inline constexpr int kAccElems = sizeof(Accum::v) / sizeof(float);
inline constexpr int kTilesPerWave = 128 / kTilePositions / kWaves;  // n-tiles of a page per wave
static_assert(kTilesPerWave * kTilePositions * kWaves == 128, "a page's positions split evenly over the waves");
static_assert(kWave * 64 * kTilesPerWave * kWaves == 32768, "each lane loads 64 B per n-tile: one 32 KiB page");

}  // namespace ctxscore::tile
