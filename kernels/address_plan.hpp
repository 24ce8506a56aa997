// The kernel's addressing: which slots a program scans, which page a slot
// reads (clamped), where its query rows, cache page and output elements
// are. The kernel calls exactly these; a CPU test walks every program of a
// launch through them and checks the written set against the reference.
// Score arithmetic (loads, dot products, max) is not here.
#pragma once

#include <cstdint>

#include "ctxscore/contract.hpp"
#include "ctxscore/validate.hpp"

namespace ctxscore {

// Everything a launch passes to the kernel, by value.
struct ScoreParams {
  const std::uint16_t* q = nullptr;      // bf16 bits [T, H, 128]
  const std::uint16_t* cache = nullptr;  // bf16 bits [P, 128, 128]
  const std::int32_t* table = nullptr;   // [B, Wt]
  const std::int32_t* lens = nullptr;    // [B]
  float* out = nullptr;                  // [H, >=T, >=L]
  std::int64_t q_token_stride = 0, q_head_stride = 0, table_stride = 0;
  std::int64_t out_head_stride = 0, out_row_stride = 0, out_slot_stride = 0;
  std::int64_t global = 0, local = 0, pages = 0;
  std::int64_t heads = 0, query_len = 0, rank = 0, world = 1;
  std::int64_t chunk = 1;   // CHUNK
  std::int64_t tile_n = 16;  // N
  float scale = 0.0f;        // SCALE
  bool q_rows_aligned = true;  // every query row starts 16-byte aligned
};

// Slots [first, last) that program (request, chunk_index) scores.
CTXSCORE_HD inline SlotRange program_range(const ScoreParams& p, std::int64_t chunk_index, std::int64_t len) {
  return program_slots(chunk_index, p.chunk, scan_slots(len, p.global, p.local, p.rank, p.world));
}
// A program's thread teams split its slots round-robin: team t of T scores
// the chunk's slots t, t + T, t + 2T, ... that lie in its range.
CTXSCORE_HD inline std::int64_t team_first_slot(const ScoreParams& p, std::int64_t chunk_index, int team) {
  return chunk_index * p.chunk + team;
}
// How a launch's programs run: thread teams per program and pages in each
// team's ring (page_stream.hpp).
struct KernelShape {
  int teams = 1;
  int ring_pages = 1;
};
// What a platform's kernel offers: a program's teams share one SM, so
// teams × ring pages is bounded; one-page teams per SM set how many one-team
// programs are resident at once.
struct KernelLimits {
  int most_teams = 1;
  int most_ring_pages = 1;
  int one_page_teams_per_sm = 1;
};
CTXSCORE_HD constexpr bool shape_supported(KernelShape k, const KernelLimits& lim) {
  return k.teams >= 1 && k.ring_pages >= 1 && k.ring_pages <= lim.most_ring_pages &&
         k.teams * k.ring_pages <= lim.most_teams;
}
// Query rows the score step reads per m-tile of a tile with `active` live
// rows (H·QL): 4 or 8 when the tile is one m-tile with at most that many,
// else all 16. The kernel has one instance per value; padding rows past it
// are zeros that are never read (matrix_tile.hpp).
CTXSCORE_HD constexpr int live_tile_rows(std::int64_t active) { return active <= 4 ? 4 : active <= 8 ? 8 : 16; }
// The launcher's choice (PERF.md has the measurements behind it):
// - no more programs than multiprocessors: one program per SM, so its slots
//   are split over the fewest teams (one-page rings) that make a team's
//   share of the chunk smallest, and score side by side;
// - a score step reading at most 8 query rows (M3 decode), or up to one
//   wave of one-page programs: one team, one-page rings, so that four
//   programs share an SM (and every program of a wave starts at once);
// - longer launches reading the whole tile: one team, two-page rings; with
//   the heavier score step a page in flight beside each one scored streams
//   faster.
inline KernelShape choose_kernel_shape(std::int64_t programs, std::int64_t chunk, int live_rows,
                                       std::int64_t multiprocessors, const KernelLimits& lim) {
  if (programs <= multiprocessors && chunk > 1 && lim.most_teams > 1) {
    int t = static_cast<int>(min64(lim.most_teams, chunk));
    while (t > 1 && ceil_div(chunk, t - 1) == ceil_div(chunk, t)) --t;
    return {t, 1};
  }
  if (live_rows > 8 && shape_supported({1, 2}, lim) && programs > lim.one_page_teams_per_sm * multiprocessors)
    return {1, 2};
  return {1, 1};
}
// The launcher's chunking. The contract fixes the chunk count upstream
// launches with, and every chunking scores the same (the forced-chunking
// properties). Where the contract's programs leave multiprocessors idle and
// one-slot programs for every slot fit one wave of one-page programs, each
// program scores one slot: all of them start at once, and each waits on one
// dependent chain (length, table entry, page) instead of several.
inline Geometry choose_chunking(Geometry g, std::int64_t multiprocessors, const KernelLimits& lim) {
  if (g.chunk > 1 && g.grid_x * g.grid_y <= multiprocessors &&
      g.grid_x * g.local <= lim.one_page_teams_per_sm * multiprocessors) {
    g.chunks = g.local;
    g.chunk = 1;
    g.grid_y = g.local;
  }
  return g;
}
CTXSCORE_HD inline std::int64_t slot_block(const ScoreParams& p, std::int64_t slot) {
  return block_of_slot(slot, p.rank, p.world);
}
// AMD's register page stream: while slot j is scored, the slot whose page
// loads next; the last iteration reloads its own page instead of branching.
CTXSCORE_HD constexpr std::int64_t register_stream_next(std::int64_t j, std::int64_t last) {
  return j + 1 < last ? j + 1 : j;
}
// Element offset of the (clamped) page a slot of `request` reads: 64-bit.
CTXSCORE_HD inline std::int64_t slot_page(const ScoreParams& p, std::int64_t request, std::int64_t slot) {
  return clamp_page(p.table[request * p.table_stride + slot_block(p, slot)], p.pages);
}
// Whether a slot's table entry exists by geometry alone (b < G ≤ Wt), so it
// may be read before the request's length is known.
CTXSCORE_HD inline bool slot_in_table(const ScoreParams& p, std::int64_t slot) {
  return slot < p.local && slot_block(p, slot) < p.global;
}
CTXSCORE_HD inline std::int64_t page_offset(std::int64_t page) { return page * kPageElems; }
// Tile rows past H·QL hold no query: they are masked, never stored.
CTXSCORE_HD inline std::int64_t tile_active_rows(const ScoreParams& p) { return p.heads * p.query_len; }
CTXSCORE_HD inline bool tile_row_active(const ScoreParams& p, std::int64_t n) { return n < tile_active_rows(p); }
CTXSCORE_HD inline std::int64_t tile_row_offset(const ScoreParams& p, std::int64_t request, std::int64_t n) {
  const std::int64_t row = request * p.query_len + tile_token(n, p.heads);
  return row * p.q_token_stride + tile_head(n, p.heads) * p.q_head_stride;
}
// Causal reach of tile row n: context positions < cutoff qualify.
CTXSCORE_HD inline std::int64_t tile_row_cutoff(const ScoreParams& p, std::int64_t len, std::int64_t n) {
  return causal_cutoff(len, p.query_len, tile_token(n, p.heads));
}
// Positions of a block that a row with this cutoff may see: pos < limit,
// a limit in [0, 128].
CTXSCORE_HD inline std::int64_t block_limit(std::int64_t cutoff, std::int64_t block) {
  return qualifying_prefix(block, cutoff);
}
CTXSCORE_HD inline std::int64_t tile_row_limit(const ScoreParams& p, std::int64_t len, std::int64_t n,
                                               std::int64_t block) {
  return block_limit(tile_row_cutoff(p, len, n), block);
}
// Out element of tile row n at slot 0; a slot adds its stride (so that the
// kernel divides by H once per row, not once per slot).
CTXSCORE_HD inline std::int64_t out_row_offset(const ScoreParams& p, std::int64_t request, std::int64_t n) {
  const std::int64_t row = request * p.query_len + tile_token(n, p.heads);
  return tile_head(n, p.heads) * p.out_head_stride + row * p.out_row_stride;
}
CTXSCORE_HD inline std::int64_t out_slot_offset(const ScoreParams& p, std::int64_t row_offset, std::int64_t slot) {
  return row_offset + slot * p.out_slot_stride;
}
CTXSCORE_HD inline std::int64_t out_offset(const ScoreParams& p, std::int64_t request, std::int64_t n,
                                           std::int64_t slot) {
  return out_slot_offset(p, out_row_offset(p, request, n), slot);
}

// The parameters of one launch: validated arguments, the geometry launched,
// and `out` when it fits (a launcher scoring into a fresh buffer sets out and
// its strides itself).
inline ScoreParams make_score_params(const ScoreArgs& a, const Layout& l, const Geometry& g) {
  ScoreParams p;
  p.q = static_cast<const std::uint16_t*>(a.idx_q.data);
  p.cache = static_cast<const std::uint16_t*>(a.index_cache.data);
  p.table = static_cast<const std::int32_t*>(a.block_table.data);
  p.lens = static_cast<const std::int32_t*>(a.seq_lens.data);
  p.q_token_stride = a.idx_q.strides[0];
  p.q_head_stride = a.idx_q.strides[1];
  p.table_stride = a.block_table.strides[0];
  p.global = g.global;
  p.local = g.local;
  p.pages = l.pages;
  p.heads = l.heads;
  p.query_len = a.max_query_len;
  p.rank = a.rank;
  p.world = a.world;
  p.chunk = g.chunk;
  p.tile_n = g.tile_n;
  p.scale = scale_fp32(a.sm_scale);
  p.q_rows_aligned = reinterpret_cast<std::uintptr_t>(p.q) % 16 == 0 && p.q_token_stride % 8 == 0 &&
                     p.q_head_stride % 8 == 0;
  if (out_fits(a, l)) {
    p.out = static_cast<float*>(a.out->data);
    p.out_head_stride = a.out->strides[0];
    p.out_row_stride = a.out->strides[1];
    p.out_slot_stride = a.out->strides[2];
  }
  return p;
}

}  // namespace ctxscore
