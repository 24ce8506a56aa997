// The matrix-unit step of the kernel, the one part where the two platforms
// differ in hardware: NVIDIA mma.sync m16n8k16 (warp of 32) and AMD MFMA
// 16x16x16 bf16 (wavefront of 64), side by side. Which lane holds which
// operand and which result is fragment_layout.hpp's, for both platforms (and
// checked on the CPU against models of both instructions); this file loads
// the operands and issues the instructions.
//
// Both work on a 16-row query tile and one n-tile of page positions. Each
// lane loads one position row's 64-byte chunk (32 dims) of the page straight
// into registers.
#pragma once

#include <cstdint>

#include "fragment_layout.hpp"
#include "platform.hpp"

namespace ctxscore::tile {

#if defined(CTXSCORE_PLATFORM_CUDA)
using namespace nvidia;
#else
using namespace amd;
#endif
static_assert(kWave == CTXSCORE_WAVE, "the platform map and the fragment layout agree on the wave");

inline constexpr int kRowWords = 64;  // u32 words (bf16 pairs) per 128-dim row

__device__ inline std::uint32_t word(const uint4& chunk, int w) {
  return w == 0 ? chunk.x : w == 1 ? chunk.y : w == 2 ? chunk.z : chunk.w;
}

#if defined(CTXSCORE_PLATFORM_CUDA)

struct Accum {
  float v[kAccElems];  // element e: row acc_row(lane, e), position acc_position(lane, e)
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
  const bool lo_live = kLiveRows >= 8 || a_row_live(lane, 0, kLiveRows);  // lanes of padding rows skip the read
  uint4 b[kTilesPerWave];  // the current chunk of each n-tile: steps 2v and 2v + 1
  // Registers 0 and 2 hold row a_row(lane, 0), 1 and 3 row a_row(lane, 1),
  // 8 rows on; a step adds a constant to the address of its first word.
  const unsigned r0 = static_cast<unsigned>(__cvta_generic_to_shared(
      q_tile + (m * 16 + a_row(lane, 0)) * QueryLayout::kRowWords + a_word(lane, 0, 0)));
  constexpr unsigned kHiRows = 4u * 8 * QueryLayout::kRowWords;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if (s % 2 == 0)
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t) b[t] = page(t, s / 2);
    const unsigned step = 4u * static_cast<unsigned>(a_word(lane, s, 0) - a_word(lane, 0, 0));
    const uint2 lo = kLiveRows >= 8 ? load_step(r0 + step) : load_step_if(lo_live, r0 + step);
    uint2 hi = make_uint2(0u, 0u);
    if constexpr (kLiveRows > 8) hi = load_step(r0 + kHiRows + step);
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      const std::uint32_t b0 = word(b[t], b_word(s, 0)), b1 = word(b[t], b_word(s, 1));
      // A registers 0..3: (row 0, word 0), (row 1, word 0), (row 0, word 1), (row 1, word 1).
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(acc[t].v[0]), "+f"(acc[t].v[1]), "+f"(acc[t].v[2]), "+f"(acc[t].v[3])
          : "r"(lo.x), "r"(hi.x), "r"(lo.y), "r"(hi.y), "r"(b0), "r"(b1));
    }
  }
}

#else  // AMD MFMA

typedef short bf16x4_t __attribute__((ext_vector_type(4)));
typedef float floatx4_t __attribute__((ext_vector_type(4)));

struct Accum {
  floatx4_t v;  // element e: row acc_row(lane, e), position acc_position(lane, e)
};
// A step's 4 dims (two words) as the MFMA operand.
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
  const std::uint32_t* r = q_tile + (m * 16 + a_row(lane, 0)) * QueryLayout::kRowWords + a_word(lane, 0, 0);
  const bool row_live = a_row_live(lane, 0, kLiveRows);
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const uint2 w = row_live ? *reinterpret_cast<const uint2*>(r + (a_word(lane, s, 0) - a_word(lane, 0, 0)))
                             : make_uint2(0u, 0u);
    const bf16x4_t a = step_operand(w);
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      const uint4 chunk = page(t, s / 2);
      const uint2 bw = make_uint2(word(chunk, b_word(s, 0)), word(chunk, b_word(s, 1)));
      acc[t].v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, step_operand(bw), acc[t].v, 0, 0, 0);
    }
  }
}

#endif

static_assert(sizeof(Accum::v) == kAccElems * sizeof(float), "the layout's accumulator is the instruction's");
static_assert(kTilesPerWave * kTilePositions * kWaves == 128, "a page's positions split evenly over the waves");
static_assert(kWave * 64 * kTilesPerWave * kWaves == 32768, "each lane loads 64 B per n-tile: one 32 KiB page");

}  // namespace ctxscore::tile
