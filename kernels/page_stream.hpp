// How a program streams its cache pages, the second place where the two
// platforms differ in hardware. The kernel is memory-bound: what sets its
// speed is how many page bytes each multiprocessor keeps in flight, also
// while programs start and end (a program scores only about four slots).
//
// NVIDIA (sm_90): asynchronous copies (cp.async, 16 B each) into a ring of
// kStages = 2 pages in shared memory. Each thread copies its 64-byte share
// of page j into registers first thing, and the buffer takes page j + 2 at
// once, so both buffers' pages fly while page j is scored. Three programs
// fit one SM (192 KiB of rings, 80 registers a thread): six pages in flight.
// AMD (gfx90a / gfx940): 64 KiB of LDS holds no ring of 32 KiB pages, so
// each lane keeps its share of the next page in registers, one page ahead.
//
// Both give the kernel one interface, called in this order:
//   PageStream(ring, p, request, first slot of the chunk)
//   begin(range)        the first pages' loads start
//   per slot j: advance(j)  a barrier, after which page j is readable;
//               fragments(j, …)  the lane's 64 bytes of each of its n-tiles,
//                               in the matrix units' operand layout;
//               release(j)  page j's buffer is free for a later page.
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
  return tile_first_position(wave, t) + lane_position(lane);
}

#if defined(CTXSCORE_PLATFORM_CUDA)

inline constexpr int kStages = 2;
static_assert((kStages & (kStages - 1)) == 0, "stage() takes the slot modulo kStages by a mask");
inline constexpr int kPageChunks = 2048;  // 16-byte chunks per 32 KiB page
inline constexpr unsigned kPageBytes = kPageChunks * 16;
static_assert(kThreads % 32 == 0 && kTilePositions % 2 == 0, "row parity, hence the swizzle, repeats per pass and per tile");
inline constexpr std::size_t kRingBytes = static_cast<std::size_t>(kStages) * kPageBytes;
// Three programs' rings (192 KiB) fill one SM's shared memory. Their
// register budget, 80 a thread, is why the query operands are read per MMA
// step and addresses are kept 32-bit.
inline constexpr int kProgramsPerSM = 3;

// Chunk k of position row `pos` lives at k ^ swizzle: the eight lanes of a
// 16-byte shared load (two rows, chunks c, c+4, c+8, c+12) then hit eight
// distinct bank groups.
__device__ inline int swizzled(int pos, int k) { return pos * 16 + (k ^ ((2 * (pos & 1) + (k >> 3)) & 3)); }

// Shared-memory addresses are 32-bit byte offsets here: half the registers
// of generic pointers, and every ring access is a shared one by construction.
__device__ inline void copy_async_16(unsigned dst, const uint4* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
__device__ inline uint4 load_shared_16(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

class PageStream {
 public:
  // Reads the page ids of the chunk's first kStages + 1 slots together,
  // before the request's length is known, so that the length load and the
  // table loads share one memory latency at the program's start.
  __device__ PageStream(uint4* ring, const ScoreParams& p, std::int64_t request, std::int64_t first)
      : ring_(static_cast<unsigned>(__cvta_generic_to_shared(ring))), p_(p), request_(request), first_(first) {
#pragma unroll
    for (int s = 0; s <= kStages; ++s) ids_[s] = table_page(first + s);
  }

  // Fills the whole ring.
  __device__ void begin(SlotRange range) {
    last_ = range.last;
#pragma unroll
    for (int s = 0; s < kStages; ++s) issue(first_ + s, ids_[s]);
    next_ = ids_[kStages];
  }

  __device__ void advance(std::int64_t) {
    // Group k holds page first + k; the kStages − 1 newer ones may still fly.
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");
    __syncthreads();  // every thread's part of page j
  }

  __device__ void fragments(std::int64_t j, int wave, int lane, PageFrags& b) const {
    // n-tiles lie kTilePositions rows apart, an even count, so a lane's
    // chunks share one swizzle across tiles: one address per chunk.
    const unsigned page = ring_ + stage(j) * kPageBytes;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const unsigned at = page + 16u * swizzled(fragment_position(wave, 0, lane), 4 * lane_chunk(lane) + v);
#pragma unroll
      for (int t = 0; t < kTilesPerWave; ++t) b[t][v] = load_shared_16(at + t * kTilePositions * 256u);
    }
  }

  // Once every thread holds its fragments of page j, its buffer takes page
  // j + kStages, so kStages pages fly while page j is scored. That page's id
  // was read one release earlier; the next one is read now, a page's time
  // ahead of its use.
  __device__ void release(std::int64_t j) {
    __syncthreads();
    issue(j + kStages, next_);
    next_ = table_page(j + kStages + 1);
  }

 private:
  // Consecutive slots take consecutive buffers, counted from slot 0 rather
  // than the range's first so that nothing beyond j is live in the loop.
  __device__ int stage(std::int64_t j) const { return static_cast<int>(j & (kStages - 1)); }

  // Clamped page ids fit 32 bits (the table holds int32); offsets do not.
  __device__ std::int32_t table_page(std::int64_t j) const {
    return slot_in_table(p_, j) ? static_cast<std::int32_t>(slot_page(p_, request_, j)) : 0;
  }

  // Starts the copy of slot j's page (none past the range) and closes one
  // commit group either way, so group k is always page first + k.
  __device__ void issue(std::int64_t j, std::int32_t page) {
    if (j < last_) {
      const uint4* src = reinterpret_cast<const uint4*>(p_.cache + page_offset(page)) + threadIdx.x;
      // Consecutive threads copy consecutive chunks; each pass moves
      // kThreads / 16 whole rows, an even count, so the thread's rows share
      // one swizzle.
      const unsigned dst = ring_ + stage(j) * kPageBytes + 16u * swizzled(threadIdx.x >> 4, threadIdx.x & 15);
#pragma unroll
      for (int i = 0; i < kPageChunks / kThreads; ++i) copy_async_16(dst + i * kThreads * 16u, src + i * kThreads);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  unsigned ring_;  // shared-memory address of the ring
  const ScoreParams& p_;
  std::int64_t request_, first_, last_ = 0;
  std::int32_t ids_[kStages + 1];
  std::int32_t next_ = 0;
};

#else  // AMD: registers, one page ahead

inline constexpr std::size_t kRingBytes = 0;
inline constexpr int kProgramsPerSM = 1;

class PageStream {
 public:
  __device__ PageStream(uint4*, const ScoreParams& p, std::int64_t request, std::int64_t)
      : p_(p), request_(request) {}

  __device__ void begin(SlotRange range) {
    range_ = range;
    load(next_, range_.first);
  }

  __device__ void advance(std::int64_t j) {
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
      for (int v = 0; v < 4; ++v) cur_[t][v] = next_[t][v];
    __syncthreads();  // slot j − 1's partial maxima are in shared memory
    // The last iteration reloads its own page instead of branching.
    load(next_, j + 1 < range_.last ? j + 1 : j);
  }

  __device__ void fragments(std::int64_t, int, int, PageFrags& b) const {
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
      for (int v = 0; v < 4; ++v) b[t][v] = cur_[t][v];
  }

  __device__ void release(std::int64_t) {}  // the next page already flies into registers

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
  SlotRange range_{0, 0};
};

#endif

}  // namespace ctxscore::tile
