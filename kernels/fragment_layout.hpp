// Where each lane's matrix-unit operands come from and where its results
// land, for both platforms side by side: NVIDIA mma.sync m16n8k16 (a warp
// of 32) and AMD MFMA 16x16x16 bf16 (a wavefront of 64). The kernel
// (matrix_tile.hpp, page_stream.hpp) takes its platform's namespace; the CPU
// tests (property_tests/matrix_layouts.cpp) drive both through host models
// of the two instructions, so both layouts are checked on any machine.
//
// The dot product does not care in which order dims are summed, so the k
// index of each of the 8 steps (k = 16 each) is mapped to dims such that a
// lane's page operands are one contiguous 16-byte chunk of a position row:
// step s, lane chunk c covers dims 32c + 4s .. 32c + 4s + 3 on both
// platforms, and the query operands follow the same mapping.
#pragma once

#include "ctxscore/contract.hpp"

namespace ctxscore::tile {

inline constexpr int kSteps = 8;     // 8 matrix steps of k = 16 over 128 dims
inline constexpr int kThreads = 256;  // a team: its waves split a page's positions

// The query tile in shared memory. Word w of a row (dims 2w, 2w + 1) is read
// by lane chunk c = w / 16 at step s = w % 16 / 2; a step reads two words
// per lane. Rows are stored step-major: step s's words of chunks 0..3 side
// by side, rows 72 words apart (288 B, 32 past a multiple of 128), so the
// sixteen lanes of each 8-byte read phase (four rows) hit 32 distinct
// banks. (In the row's own, chunk-major order a step's reads hit each bank
// twice: chunks 0 and 2 share banks.)
struct QueryLayout {
  static constexpr int kRowWords = 72;
  CTXSCORE_HD static constexpr int step_word(int chunk, int step) { return step * 8 + 2 * chunk; }
  CTXSCORE_HD static constexpr int tile_word(int w) { return step_word(w / 16, w % 16 / 2) + w % 2; }
};

// NVIDIA mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32.
namespace nvidia {
inline constexpr int kWave = 32;
inline constexpr int kTilePositions = 8;  // n of m16n8k16
inline constexpr int kAccElems = 4;       // (row g, pos 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)
inline constexpr int kAccRows = 2;        // distinct rows per lane: g and g + 8
inline constexpr int kRowPeerSpan = 4;    // lanes holding the same rows differ below this
inline constexpr int kAWords = 4;         // A registers of two bf16 each
inline constexpr int kBWords = 2;
// Lane roles: the position row it loads within the n-tile and its 32-dim chunk.
CTXSCORE_HD constexpr int lane_position(int lane) { return lane >> 2; }
CTXSCORE_HD constexpr int lane_chunk(int lane) { return lane & 3; }
// A register r of a lane at step s: its tile row (within the m-tile) and the
// stored query word it holds (in that row, QueryLayout order). Registers
// {0, 2} are row g, {1, 3} row g + 8; {0, 1} the step's first word, {2, 3} its second.
CTXSCORE_HD constexpr int a_row(int lane, int r) { return (lane >> 2) + 8 * (r & 1); }
CTXSCORE_HD constexpr int a_word(int lane, int s, int r) { return QueryLayout::step_word(lane & 3, s) + (r >> 1); }
// B register r of a lane at step s: word `b_word` of the lane's 16-byte page
// chunk `b_chunk` (chunks of the lane's position row, 16 to a row).
CTXSCORE_HD constexpr int b_chunk(int lane, int s) { return 4 * lane_chunk(lane) + s / 2; }
CTXSCORE_HD constexpr int b_word(int s, int r) { return 2 * (s & 1) + r; }
// Accumulator element e of a lane: its tile row and position within the n-tile.
CTXSCORE_HD constexpr int acc_row(int lane, int e) { return (lane >> 2) + (e >= 2 ? 8 : 0); }
CTXSCORE_HD constexpr int acc_position(int lane, int e) { return 2 * (lane & 3) + (e & 1); }
CTXSCORE_HD constexpr int acc_row_index(int e) { return e >> 1; }   // which of the lane's rows element e holds
CTXSCORE_HD constexpr int acc_row_element(int r) { return 2 * r; }  // an element holding row index r
// Whether row index r is a live row in some lane of the wave when only the
// tile's first live_rows rows are.
CTXSCORE_HD constexpr bool acc_rows_live(int r, int live_rows) { return 8 * r < live_rows; }
CTXSCORE_HD constexpr bool row_leader(int lane) { return (lane & 3) == 0; }
// Whether a lane reads its A words at all when only the first live_rows rows are live.
CTXSCORE_HD constexpr bool a_row_live(int lane, int r, int live_rows) { return a_row(lane, r) < live_rows; }
// A wave's n-tiles of the page, and the position row lane `lane` feeds for n-tile t.
inline constexpr int kWaves = kThreads / kWave;
inline constexpr int kTilesPerWave = 128 / kTilePositions / kWaves;
CTXSCORE_HD constexpr int tile_first_position(int wave, int t) { return (wave * kTilesPerWave + t) * kTilePositions; }
CTXSCORE_HD constexpr int fragment_position(int wave, int t, int lane) { return tile_first_position(wave, t) + lane_position(lane); }
}  // namespace nvidia

// AMD v_mfma_f32_16x16x16bf16_1k.
namespace amd {
inline constexpr int kWave = 64;
inline constexpr int kTilePositions = 16;
inline constexpr int kAccElems = 4;      // rows 4·(lane / 16) + e, position lane % 16
inline constexpr int kAccRows = 4;
inline constexpr int kRowPeerSpan = 16;
inline constexpr int kAWords = 2;        // the A operand: four bf16 in two words
inline constexpr int kBWords = 2;
CTXSCORE_HD constexpr int lane_position(int lane) { return lane & 15; }
CTXSCORE_HD constexpr int lane_chunk(int lane) { return lane >> 4; }
CTXSCORE_HD constexpr int a_row(int lane, int) { return lane & 15; }
CTXSCORE_HD constexpr int a_word(int lane, int s, int r) { return QueryLayout::step_word(lane >> 4, s) + r; }
CTXSCORE_HD constexpr int b_chunk(int lane, int s) { return 4 * lane_chunk(lane) + s / 2; }
CTXSCORE_HD constexpr int b_word(int s, int r) { return 2 * (s & 1) + r; }
CTXSCORE_HD constexpr int acc_row(int lane, int e) { return 4 * (lane >> 4) + e; }
CTXSCORE_HD constexpr int acc_position(int lane, int) { return lane & 15; }
CTXSCORE_HD constexpr int acc_row_index(int e) { return e; }
CTXSCORE_HD constexpr int acc_row_element(int r) { return r; }
CTXSCORE_HD constexpr bool acc_rows_live(int, int) { return true; }  // every index has rows 0..3 in lanes 0..15
CTXSCORE_HD constexpr bool row_leader(int lane) { return (lane & 15) == 0; }
CTXSCORE_HD constexpr bool a_row_live(int lane, int r, int live_rows) { return a_row(lane, r) < live_rows; }
// A wave's n-tiles of the page, and the position row lane `lane` feeds for n-tile t.
inline constexpr int kWaves = kThreads / kWave;
inline constexpr int kTilesPerWave = 128 / kTilePositions / kWaves;
CTXSCORE_HD constexpr int tile_first_position(int wave, int t) { return (wave * kTilesPerWave + t) * kTilePositions; }
CTXSCORE_HD constexpr int fragment_position(int wave, int t, int lane) { return tile_first_position(wave, t) + lane_position(lane); }
}  // namespace amd

// NVIDIA's page ring in shared memory: chunk k of position row `pos` lives
// at chunk pos·16 + (k ^ swizzle), so the eight lanes of a 16-byte shared
// load (two rows, chunks c, c+4, c+8, c+12) hit eight distinct bank groups.
// The swizzle depends on the row's parity alone: n-tiles 8 rows apart read
// with one address pattern.
CTXSCORE_HD constexpr int ring_chunk(int pos, int k) { return pos * 16 + (k ^ ((2 * (pos & 1) + (k >> 3)) & 3)); }

// Where a lane's page operands come from: the element offset (in the page)
// of 16-byte chunk `chunk` of position `pos`. The AMD page stream loads
// each lane's chunks of n-tile t one page ahead with exactly these offsets.
CTXSCORE_HD constexpr int page_chunk_offset(int pos, int chunk) { return pos * 128 + chunk * 8; }

}  // namespace ctxscore::tile
