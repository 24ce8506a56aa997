// How a program streams its cache pages, the second place where the two
// platforms differ in hardware. The kernel is memory-bound: what sets its
// speed is how many page bytes each multiprocessor keeps in flight.
//
// NVIDIA (sm_90): asynchronous copies (cp.async, 16 B each) into a ring of
// kStages pages in shared memory, so kStages − 1 pages are on their way
// while one is scored; two programs fit one SM, six pages in flight.
// AMD (gfx90a / gfx940): 64 KiB of LDS holds no ring of 32 KiB pages, so
// each lane keeps its share of the next page in registers, one page ahead.
//
// Both give the kernel one interface: begin(range) before the loop,
// advance(j) at the top of iteration j (page j is then readable by every
// thread and the buffer of iteration j − 1 is free), fragment(j, t) for a
// lane's 64 bytes of n-tile t in the matrix units' operand layout.
#pragma once

#include <cstdint>

#include "address_plan.hpp"
#include "matrix_tile.hpp"

namespace ctxscore::tile {

// The page of `slot` for `request`, clamped.
__device__ inline const std::uint16_t* slot_page_data(const ScoreParams& p, std::int64_t request, std::int64_t slot) {
  return p.cache + page_offset(slot_page(p, request, slot));
}

// The position row and 16-byte chunk range of n-tile t that this lane feeds
// to the matrix unit: row `pos`, chunks 4·lane_chunk .. 4·lane_chunk + 3.
__device__ inline int fragment_position(int wave, int t, int lane) {
  return (wave * kTilesPerWave + t) * kTilePositions + lane_position(lane);
}

#if defined(CTXSCORE_PLATFORM_CUDA)

inline constexpr int kStages = 3;
inline constexpr int kPageChunks = 2048;  // 16-byte chunks per 32 KiB page
inline constexpr std::size_t kRingBytes = static_cast<std::size_t>(kStages) * kPageChunks * 16;

// Chunk k of position row `pos` lives at k ^ swizzle: the eight lanes of a
// 16-byte shared load (two rows, chunks c, c+4, c+8, c+12) then hit eight
// distinct bank groups.
__device__ inline int swizzled(int pos, int k) { return pos * 16 + (k ^ ((2 * (pos & 1) + (k >> 3)) & 3)); }

__device__ inline void copy_async_16(uint4* dst, const uint4* src) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(src) : "memory");
}

class PageStream {
 public:
  __device__ PageStream(uint4* ring, const ScoreParams& p, std::int64_t request, SlotRange range)
      : ring_(ring), p_(p), request_(request), range_(range) {}

  __device__ void begin() {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) issue(range_.first + s);
  }

  __device__ void advance(std::int64_t j) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");  // this thread's part of page j
    __syncthreads();  // every thread's part; iteration j − 1 done with its buffer
    issue(j + kStages - 1);
  }

  __device__ void fragment(std::int64_t j, int t, int wave, int lane, uint4 (&b)[4]) const {
    const uint4* page = ring_ + stage(j) * kPageChunks;
    const int pos = fragment_position(wave, t, lane);
#pragma unroll
    for (int v = 0; v < 4; ++v) b[v] = page[swizzled(pos, 4 * lane_chunk(lane) + v)];
  }

 private:
  __device__ int stage(std::int64_t j) const { return static_cast<int>((j - range_.first) % kStages); }

  // Starts the copy of slot j's page (none past the range) and closes one
  // commit group either way, so group k is always page first + k.
  __device__ void issue(std::int64_t j) {
    if (j < range_.last) {
      const uint4* src = reinterpret_cast<const uint4*>(slot_page_data(p_, request_, j));
      uint4* dst = ring_ + stage(j) * kPageChunks;
#pragma unroll
      for (int i = 0; i < kPageChunks / kThreads; ++i) {
        const int e = static_cast<int>(threadIdx.x) + i * kThreads;  // consecutive threads, consecutive chunks
        copy_async_16(dst + swizzled(e >> 4, e & 15), src + e);
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  uint4* ring_;
  const ScoreParams& p_;
  std::int64_t request_;
  SlotRange range_;
};

#else  // AMD: registers, one page ahead

inline constexpr std::size_t kRingBytes = 0;

class PageStream {
 public:
  __device__ PageStream(uint4*, const ScoreParams& p, std::int64_t request, SlotRange range)
      : p_(p), request_(request), range_(range) {}

  __device__ void begin() { load(next_, range_.first); }

  __device__ void advance(std::int64_t j) {
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
      for (int v = 0; v < 4; ++v) cur_[t][v] = next_[t][v];
    __syncthreads();  // iteration j − 1's partial maxima are consumed
    // The last iteration reloads its own page instead of branching.
    load(next_, j + 1 < range_.last ? j + 1 : j);
  }

  __device__ void fragment(std::int64_t, int t, int, int, uint4 (&b)[4]) const {
#pragma unroll
    for (int v = 0; v < 4; ++v) b[v] = cur_[t][v];
  }

 private:
  __device__ void load(uint4 (&dst)[kTilesPerWave][4], std::int64_t j) {
    const std::uint16_t* page = slot_page_data(p_, request_, j);
    const int lane = static_cast<int>(threadIdx.x) % kWave, wave = static_cast<int>(threadIdx.x) / kWave;
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      const uint4* src = reinterpret_cast<const uint4*>(page + fragment_position(wave, t, lane) * 128) + 4 * lane_chunk(lane);
#pragma unroll
      for (int v = 0; v < 4; ++v) dst[t][v] = src[v];
    }
  }

  uint4 cur_[kTilesPerWave][4], next_[kTilesPerWave][4];
  const ScoreParams& p_;
  std::int64_t request_;
  SlotRange range_;
};

#endif

}  // namespace ctxscore::tile
