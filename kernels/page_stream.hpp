// How a program streams its cache pages, the second place where the two
// platforms differ in hardware. The kernel is memory-bound: what sets its
// speed is how many page bytes each multiprocessor keeps in flight, also
// while programs start and end (a program scores only about four slots).
//
// A program is one or more teams of kThreads threads; team t of T scores
// the slots first + t, first + t + T, ... of the program's range with its
// own page stream and its own barrier, so the teams of a small launch score
// their slots side by side (the launcher picks T; see context_score.hip).
//
// NVIDIA (sm_90): asynchronous copies (cp.async, 16 B each) into a ring of
// kRingPages pages in shared memory per team; the team reads page k's
// operands from the ring as its matrix steps run, then its buffer takes
// page k + kRingPages. Two ring depths, picked per launch:
// - two pages: three teams per SM (192 KiB of rings, 80 registers a
//   thread), a page flying beside each one scored: the steady stream of
//   long launches;
// - one page: four teams per SM (64 registers a thread), so up to 528
//   one-team programs are resident at once on an H200, and a program of
//   four teams scores CHUNK = 4 slots side by side.
// AMD (gfx90a / gfx940): 64 KiB of LDS holds no ring of 32 KiB pages, so
// each lane keeps its share of the next page in registers, one page ahead;
// a program is one team, the "ring" one page.
//
// Both give the kernel one interface, called in this order:
//   PageStream<teams, ring pages>(ring, p, request, team's first slot, team)
//   begin(range)        the first pages' loads start
//   per team slot j: advance(j)  the team's barrier, after which page j is readable;
//                    fragment(j, …, t, v)  the lane's 16-byte chunk v of its n-tile t,
//                                          in the matrix units' operand layout;
//                    release(j)  the team has scored page j: its buffer takes a later page.
#pragma once

#include <cstdint>

#include "address_plan.hpp"
#include "matrix_tile.hpp"

namespace ctxscore::tile {

// The barrier of one team (barrier 0 is the whole program's).
__device__ inline void team_barrier(int team) {
#if defined(CTXSCORE_PLATFORM_CUDA)
  asm volatile("bar.sync %0, %1;\n" ::"r"(team + 1), "n"(kThreads) : "memory");
#else
  (void)team;  // one team per program
  __syncthreads();
#endif
}

// The page of `slot` for `request`, clamped.
__device__ inline const std::uint16_t* slot_page_data(const ScoreParams& p, std::int64_t request, std::int64_t slot) {
  return p.cache + page_offset(slot_page(p, request, slot));
}

#if defined(CTXSCORE_PLATFORM_CUDA)

inline constexpr int kPageChunks = 2048;  // 16-byte chunks per 32 KiB page
inline constexpr unsigned kPageBytes = kPageChunks * 16;
inline constexpr unsigned kRowBytes = kPageBytes / 128;  // one position's 128 bf16 dims
static_assert(kThreads % 32 == 0 && kTilePositions % 2 == 0, "row parity, hence the swizzle, repeats per pass and per tile");
inline constexpr int kMaxRingPages = 2;
CTXSCORE_HD constexpr std::size_t ring_bytes(int ring_pages) { return static_cast<std::size_t>(ring_pages) * kPageBytes; }
// Teams one SM holds at a ring depth: three two-page rings fill its shared
// memory; with one page, registers cap it at four (64 a thread), which is
// why operands are read per MMA step and addresses are kept 32-bit.
CTXSCORE_HD constexpr int teams_per_sm(int ring_pages) { return ring_pages == 1 ? 4 : 3; }
// A program's teams share one SM, so a program holds at most four one-page
// rings or two two-page ones (teams × ring pages ≤ kMaxTeams).
inline constexpr int kMaxTeams = 4;

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

template <int kTeams, int kRingPages>
class PageStream {
  static_assert((kRingPages & (kRingPages - 1)) == 0, "stage() takes the slot modulo kRingPages by a mask");

 public:
  // Reads the page ids of the team's first kRingPages + 1 slots together,
  // before the request's length is known, so that the length load and the
  // table loads share one memory latency at the program's start.
  __device__ PageStream(uint4* ring, const ScoreParams& p, std::int64_t request, std::int64_t first, int team)
      : ring_(static_cast<unsigned>(__cvta_generic_to_shared(ring)) + team * kRingPages * kPageBytes),
        p_(p), request_(request), first_(first) {
#pragma unroll
    for (int s = 0; s <= kRingPages; ++s) ids_[s] = table_page(first + s * kTeams);
  }

  // Fills the team's ring.
  __device__ void begin(SlotRange range) {
    last_ = range.last;
#pragma unroll
    for (int s = 0; s < kRingPages; ++s) issue(first_ + s * kTeams, ids_[s]);
    next_ = ids_[kRingPages];
  }

  __device__ void advance(std::int64_t) {
    // Group k holds the team's k-th page; the kRingPages − 1 newer ones may still fly.
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kRingPages - 1) : "memory");
    team_barrier(team());  // every thread's part of page j
  }

  __device__ uint4 fragment(std::int64_t j, int wave, int lane, int t, int v) const {
    // n-tiles lie kTilePositions rows apart, an even count, so a lane's
    // chunk v has one swizzle across tiles.
    const unsigned at = ring_ + stage(j) * kPageBytes +
                        16u * ring_chunk(fragment_position(wave, 0, lane), b_chunk(lane, 2 * v));
    return load_shared_16(at + t * kTilePositions * kRowBytes);
  }

  // Once the team has scored page j, its buffer takes the page kRingPages team
  // slots on. That page's id was read one release earlier; the next one is
  // read now, a page's time ahead of its use.
  __device__ void release(std::int64_t j) {
    team_barrier(team());
    issue(j + kRingPages * kTeams, next_);
    next_ = table_page(j + (kRingPages + 1) * kTeams);
  }

 private:
  // The team comes from the thread's index when needed rather than held in a register.
  __device__ static int team() { return kTeams == 1 ? 0 : static_cast<int>(threadIdx.x) / kThreads; }
  // The team's consecutive slots take consecutive buffers: its slots are
  // kTeams apart, so j / kTeams counts them. Counted from slot 0 rather than
  // the team's first so that nothing beyond j is live in the loop.
  __device__ static int stage(std::int64_t j) { return static_cast<int>((j / kTeams) & (kRingPages - 1)); }

  // Clamped page ids fit 32 bits (the table holds int32); offsets do not.
  __device__ std::int32_t table_page(std::int64_t j) const {
    return slot_in_table(p_, j) ? static_cast<std::int32_t>(slot_page(p_, request_, j)) : 0;
  }

  // Starts the copy of slot j's page (none past the range) and closes one
  // commit group either way, so group k is always the team's k-th page.
  __device__ void issue(std::int64_t j, std::int32_t page) {
    if (j < last_) {
      const int tid = static_cast<int>(threadIdx.x) % kThreads;
      const uint4* src = reinterpret_cast<const uint4*>(p_.cache + page_offset(page)) + tid;
      // Consecutive threads copy consecutive chunks; each pass moves
      // kThreads / 16 whole rows, an even count, so the thread's rows share
      // one swizzle.
      const unsigned dst = ring_ + stage(j) * kPageBytes + 16u * ring_chunk(tid >> 4, tid & 15);
#pragma unroll
      for (int i = 0; i < kPageChunks / kThreads; ++i) copy_async_16(dst + i * kThreads * 16u, src + i * kThreads);
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  unsigned ring_;  // shared-memory address of the team's ring
  const ScoreParams& p_;
  std::int64_t request_, first_, last_ = 0;
  std::int32_t ids_[kRingPages + 1];
  std::int32_t next_ = 0;
};

#else  // AMD: registers, one page ahead

inline constexpr int kMaxRingPages = 1;
CTXSCORE_HD constexpr std::size_t ring_bytes(int) { return 0; }
CTXSCORE_HD constexpr int teams_per_sm(int) { return 1; }
inline constexpr int kMaxTeams = 1;

template <int kTeams, int kRingPages>
class PageStream {
  static_assert(kTeams == 1 && kRingPages == 1, "the register stream counts a program's slots as its own, one page ahead");

 public:
  __device__ PageStream(uint4*, const ScoreParams& p, std::int64_t request, std::int64_t first, int)
      : p_(p), request_(request), first_(first) {}

  __device__ void begin(SlotRange range) {
    last_ = range.last;
    load(next_, first_);
  }

  __device__ void advance(std::int64_t j) {
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t)
#pragma unroll
      for (int v = 0; v < 4; ++v) cur_[t][v] = next_[t][v];
    __syncthreads();  // slot j − 1's partial maxima are in shared memory
    load(next_, register_stream_next(j, last_));
  }

  __device__ uint4 fragment(std::int64_t, int, int, int t, int v) const { return cur_[t][v]; }

  __device__ void release(std::int64_t) {}  // the next page already flies into registers

 private:
  __device__ void load(uint4 (&dst)[kTilesPerWave][4], std::int64_t j) {
    const std::uint16_t* page = slot_page_data(p_, request_, j);
    const int lane = static_cast<int>(threadIdx.x) % kWave, wave = static_cast<int>(threadIdx.x) / kWave;
#pragma unroll
    for (int t = 0; t < kTilesPerWave; ++t) {
      // The lane's chunks b_chunk(lane, 2v) = b_chunk(lane, 0) + v of its position row, v = 0..3.
      const uint4* src = reinterpret_cast<const uint4*>(page + page_chunk_offset(fragment_position(wave, t, lane), b_chunk(lane, 0)));
#pragma unroll
      for (int v = 0; v < 4; ++v) dst[t][v] = src[v];
    }
  }

  uint4 cur_[kTilesPerWave][4], next_[kTilesPerWave][4];
  const ScoreParams& p_;
  std::int64_t request_, first_, last_ = 0;
};

#endif

}  // namespace ctxscore::tile
