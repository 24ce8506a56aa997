// The contract's formulas, once; reference/CONTRACT.md states them in prose,
// and each function below names its section ("§4"). Everything that needs a
// rule (the reference, the kernel's launcher and address plan, the harness,
// the tests) calls these.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define CTXSCORE_HD __host__ __device__
#else
#define CTXSCORE_HD
#endif

namespace ctxscore {

inline constexpr std::int64_t kBlockTokens = 128;  // tokens per logical block / cache page
inline constexpr std::int64_t kHeadDim = 128;      // D
inline constexpr std::int64_t kPageElems = kBlockTokens * kHeadDim;
// §6
inline constexpr std::int64_t kTargetGrid = std::int64_t{1} << 14;
inline constexpr std::int64_t kMinBlocks = 3;
// §3: the literal upstream multiplies sm_scale by (log2 e, truncated); SCALE
// is that product rounded once to fp32.
inline constexpr double kLog2eLiteral = 1.4426950409;

// ceil(a / b) for b > 0 and any sign of a (floor-correct for negatives).
CTXSCORE_HD constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}
CTXSCORE_HD constexpr std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
CTXSCORE_HD constexpr std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// Largest power of two <= x (x >= 1): Python's 1 << (x.bit_length() - 1).
CTXSCORE_HD constexpr std::int64_t floor_pow2(std::int64_t x) {
  std::int64_t p = 1;
  while (p <= x / 2) p *= 2;
  return p;
}
// Smallest power of two >= x; 1 for x <= 1 (triton.next_power_of_2).
CTXSCORE_HD constexpr std::int64_t next_pow2(std::int64_t x) {
  std::int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// §3: G = ceil(S / 128).
CTXSCORE_HD constexpr std::int64_t global_blocks(std::int64_t max_seq_len) {
  return ceil_div(max_seq_len, kBlockTokens);
}
// §3: L = ceil(G / world).
CTXSCORE_HD constexpr std::int64_t local_slots(std::int64_t global, std::int64_t world) {
  return ceil_div(global, world);
}
// §3: local slot j of rank r holds logical block j·world + r.
CTXSCORE_HD constexpr std::int64_t block_of_slot(std::int64_t slot, std::int64_t rank,
                                                 std::int64_t world) {
  return slot * world + rank;
}
// §4: end = min(ceil(len / 128), G), the blocks request i reaches (<= 0 when len <= 0).
CTXSCORE_HD constexpr std::int64_t reach_blocks(std::int64_t len, std::int64_t global) {
  return min64(ceil_div(len, kBlockTokens), global);
}
// §4: scan = min(L, ceil(max(end − r, 0) / world)), the local slots written for a request.
CTXSCORE_HD constexpr std::int64_t scan_slots(std::int64_t len, std::int64_t global,
                                              std::int64_t local, std::int64_t rank,
                                              std::int64_t world) {
  return min64(local, ceil_div(max64(reach_blocks(len, global) - rank, 0), world));
}
// §4: the causal reach of query token t; positions < cutoff qualify.
CTXSCORE_HD constexpr std::int64_t causal_cutoff(std::int64_t len, std::int64_t query_len,
                                                 std::int64_t token) {
  return len - query_len + token + 1;
}
CTXSCORE_HD constexpr bool position_qualifies(std::int64_t block, std::int64_t pos,
                                              std::int64_t cutoff) {
  return block * kBlockTokens + pos < cutoff;
}
// §4: the positions of a block that qualify are a prefix of it; its length.
CTXSCORE_HD constexpr std::int64_t qualifying_prefix(std::int64_t block, std::int64_t cutoff) {
  return min64(max64(cutoff - block * kBlockTokens, 0), kBlockTokens);
}
// §4: the positions of a block that some row of a request of length len
// sees: its last token's prefix (that token's cutoff is len).
CTXSCORE_HD constexpr std::int64_t request_prefix(std::int64_t block, std::int64_t len) {
  return qualifying_prefix(block, len);
}
// §4: out-of-range page ids are clamped into [0, P−1], never dereferenced.
CTXSCORE_HD constexpr std::int64_t clamp_page(std::int64_t page_id, std::int64_t pages) {
  return page_id < 0 ? 0 : (page_id > pages - 1 ? pages - 1 : page_id);
}
// §3: SCALE = fp32(sm_scale × 1.4426950409), rounded once.
CTXSCORE_HD inline float scale_fp32(double sm_scale) {
  return static_cast<float>(sm_scale * kLog2eLiteral);
}
// §6: query rows one program holds, max(16, next_pow2(H·QL)).
CTXSCORE_HD constexpr std::int64_t tile_rows(std::int64_t heads, std::int64_t query_len) {
  return max64(16, next_pow2(heads * query_len));
}
// Tile row n holds (token, head) = (n / H, n % H).
CTXSCORE_HD constexpr std::int64_t tile_token(std::int64_t n, std::int64_t heads) { return n / heads; }
CTXSCORE_HD constexpr std::int64_t tile_head(std::int64_t n, std::int64_t heads) { return n % heads; }

// §6: the chunk count one score row is split across (a count, not a size).
constexpr std::int64_t score_chunks(std::int64_t batch, std::int64_t local) {
  if (local <= 0) return 1;
  const std::int64_t target = max64(1, kTargetGrid / max64(1, batch));
  std::int64_t c = min64(floor_pow2(target), local);
  c = min64(c, max64(1, ceil_div(local, kMinBlocks)));
  return ceil_div(local, ceil_div(local, c));  // drops counts that would leave programs empty
}

struct Geometry {
  std::int64_t global = 0;   // G
  std::int64_t local = 0;    // L
  std::int64_t chunks = 0;   // c' = min(L, score_chunks(B, L))
  std::int64_t chunk = 0;    // CHUNK, a power of two
  std::int64_t grid_x = 0;   // B
  std::int64_t grid_y = 0;   // ceil(L / CHUNK)
  std::int64_t tile_n = 0;   // N
};

// §6: the production launch geometry; it depends on (B, S, world, H, QL) only.
constexpr Geometry launch_geometry(std::int64_t batch, std::int64_t max_seq_len,
                                   std::int64_t world, std::int64_t heads,
                                   std::int64_t query_len) {
  Geometry g;
  g.global = global_blocks(max_seq_len);
  g.local = local_slots(g.global, world);
  g.chunks = min64(g.local, score_chunks(batch, g.local));
  g.chunk = next_pow2(ceil_div(g.local, g.chunks));
  g.grid_x = batch;
  g.grid_y = ceil_div(g.local, g.chunk);
  g.tile_n = tile_rows(heads, query_len);
  return g;
}

// §6: program (i, c) scores local slots [first, last) of its request.
struct SlotRange {
  std::int64_t first;
  std::int64_t last;
  CTXSCORE_HD constexpr bool empty() const { return first >= last; }
};
CTXSCORE_HD constexpr SlotRange program_slots(std::int64_t chunk_index, std::int64_t chunk,
                                              std::int64_t scan) {
  return SlotRange{chunk_index * chunk, min64((chunk_index + 1) * chunk, scan)};
}

}  // namespace ctxscore
