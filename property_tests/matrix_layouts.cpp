// The kernel's fragment layouts, both platforms, on the CPU. Host models of
// the two matrix instructions — NVIDIA mma.sync m16n8k16 bf16 and AMD
// v_mfma_f32_16x16x16bf16_1k, each written from its vendor's description of
// which lane holds which operand and result element, not from
// kernels/fragment_layout.hpp — are fed through the kernel's own index
// functions (which words of the query tile and which page chunk each lane
// loads at each step, where each accumulator element lands) over random
// tiles and every count of live rows; the products must be the plain tile
// product. Then the page addressing: AMD's lanes load every element of a
// page once, one page ahead; NVIDIA's ring reads find what its copies wrote
// (label cpu).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "address_plan.hpp"
#include "ctxscore/contents.hpp"
#include "fragment_layout.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using tile::QueryLayout;

double bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
double low_half(std::uint32_t w) { return bf16_value(static_cast<std::uint16_t>(w & 0xFFFFu)); }
double high_half(std::uint32_t w) { return bf16_value(static_cast<std::uint16_t>(w >> 16)); }

// A 16-row query tile (rows past `live` zero) and `positions` page rows, as
// the kernel holds them: the tile in QueryLayout's stored word order, the
// page as 32-bit words, 64 to a row.
struct Tiles {
  std::vector<std::uint16_t> q, k;           // [16][128], [positions][128] bf16 bits
  std::vector<std::uint32_t> stored, page;   // [16][kRowWords], [positions][64]
  int positions = 0;
  double q_at(int row, int d) const { return bf16_value(q[static_cast<std::size_t>(row * 128 + d)]); }
  double k_at(int pos, int d) const { return bf16_value(k[static_cast<std::size_t>(pos * 128 + d)]); }
};

Tiles random_tiles(std::uint64_t seed, int live, int positions) {
  Tiles t;
  t.positions = positions;
  t.q.assign(16 * 128, 0);
  t.k.assign(static_cast<std::size_t>(positions) * 128, 0);
  for (int e = 0; e < live * 128; ++e) t.q[static_cast<std::size_t>(e)] = content_bits(seed, Stream::queries, static_cast<std::uint64_t>(e));
  for (std::size_t e = 0; e < t.k.size(); ++e) t.k[e] = content_bits(seed, Stream::cache, e);
  t.stored.assign(16 * QueryLayout::kRowWords, 0xDEADBEEFu);  // words no step may read
  for (int row = 0; row < 16; ++row)
    for (int w = 0; w < 64; ++w)
      t.stored[static_cast<std::size_t>(row * QueryLayout::kRowWords + QueryLayout::tile_word(w))] =
          static_cast<std::uint32_t>(t.q[static_cast<std::size_t>(row * 128 + 2 * w)]) |
          static_cast<std::uint32_t>(t.q[static_cast<std::size_t>(row * 128 + 2 * w + 1)]) << 16;
  t.page.resize(static_cast<std::size_t>(positions) * 64);
  for (int p = 0; p < positions; ++p)
    for (int w = 0; w < 64; ++w)
      t.page[static_cast<std::size_t>(p * 64 + w)] = static_cast<std::uint32_t>(t.k[static_cast<std::size_t>(p * 128 + 2 * w)]) |
                                                     static_cast<std::uint32_t>(t.k[static_cast<std::size_t>(p * 128 + 2 * w + 1)]) << 16;
  return t;
}

// The plain product of live rows and page positions, and a check that the
// accumulators (row, position) cover it exactly once.
void expect_tile_product(const Tiles& t, int live, const std::vector<double>& got, const std::vector<int>& hits) {
  for (int row = 0; row < live; ++row)
    for (int p = 0; p < t.positions; ++p) {
      double want = 0;
      for (int d = 0; d < 128; ++d) want += t.q_at(row, d) * t.k_at(p, d);
      ASSERT_EQ(hits[static_cast<std::size_t>(row * t.positions + p)], 1) << "row " << row << " position " << p;
      ASSERT_EQ(got[static_cast<std::size_t>(row * t.positions + p)], want) << "row " << row << " position " << p;
    }
}

// NVIDIA mma.sync.m16n8k16 with bf16 A (row-major 16x16), B (column-major
// 16x8), f32 C/D, as the PTX ISA lays the fragments out over a warp: with
// g = lane / 4 and c = lane % 4, A register r holds row g (r = 0, 2) or g + 8
// (r = 1, 3) at columns 2c, 2c + 1 (r = 0, 1) or 2c + 8, 2c + 9 (r = 2, 3),
// low half first; B register r holds rows 2c, 2c + 1 (r = 0) or 2c + 8,
// 2c + 9 (r = 1) of column g; D element e is row g (e < 2) or g + 8, column
// 2c + e % 2. D += A·B, exactly (fp64).
// Registers and accumulators of a wave, lane-major: a[lane * 4 + r],
// b[lane * 2 + r], d[lane * 4 + e].
using Regs = std::vector<std::uint32_t>;
using Accs = std::vector<double>;

void nvidia_mma_model(const Regs& a, const Regs& b, Accs& d) {
  double A[16][16] = {}, B[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, c = lane % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + ((r & 1) ? 8 : 0), col = 2 * c + ((r & 2) ? 8 : 0);
      A[row][col] = low_half(a[static_cast<std::size_t>(lane * 4 + r)]);
      A[row][col + 1] = high_half(a[static_cast<std::size_t>(lane * 4 + r)]);
    }
    for (int r = 0; r < 2; ++r) {
      const int k = 2 * c + (r ? 8 : 0);
      B[k][g] = low_half(b[static_cast<std::size_t>(lane * 2 + r)]);
      B[k + 1][g] = high_half(b[static_cast<std::size_t>(lane * 2 + r)]);
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) {
      const int row = lane / 4 + (e >= 2 ? 8 : 0), col = 2 * (lane % 4) + e % 2;
      for (int k = 0; k < 16; ++k) d[static_cast<std::size_t>(lane * 4 + e)] += A[row][k] * B[k][col];
    }
}

// AMD v_mfma_f32_16x16x16bf16_1k over a wavefront of 64, as AMD's matrix
// instruction tables lay it out: lane l holds A[l % 16][4·(l / 16) + i] and
// B[4·(l / 16) + i][l % 16] for i = 0..3 (two bf16 per register, low half
// first), and D[4·(l / 16) + i][l % 16]. D += A·B, exactly.
void amd_mfma_model(const Regs& a, const Regs& b, Accs& d) {
  double A[16][16] = {}, B[16][16] = {};
  for (int lane = 0; lane < 64; ++lane) {
    const int block = lane / 16, col = lane % 16;
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t wa = a[static_cast<std::size_t>(lane * 4 + i / 2)], wb = b[static_cast<std::size_t>(lane * 2 + i / 2)];
      A[col][4 * block + i] = i % 2 ? high_half(wa) : low_half(wa);
      B[4 * block + i][col] = i % 2 ? high_half(wb) : low_half(wb);
    }
  }
  for (int lane = 0; lane < 64; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int k = 0; k < 16; ++k) d[static_cast<std::size_t>(lane * 4 + i)] += A[4 * (lane / 16) + i][k] * B[k][lane % 16];
}

// One platform's fragment index functions, as the kernel calls them.
struct LaneLayout {
  int wave, tile_positions, a_words, b_words, acc_elems, acc_rows;
  bool (*a_row_live)(int lane, int r, int live);
  int (*a_row)(int lane, int r);
  int (*a_word)(int lane, int s, int r);
  int (*lane_position)(int lane);
  int (*b_chunk)(int lane, int s);
  int (*b_word)(int s, int r);
  int (*acc_row)(int lane, int e);
  int (*acc_position)(int lane, int e);
  int (*acc_row_index)(int e);
  int (*acc_row_element)(int r);
  bool (*acc_rows_live)(int r, int live);
};

// A namespace is no template argument: each platform's table is spelled out.
#define CTXSCORE_LANE_LAYOUT(L)                                                                                \
  LaneLayout {                                                                                                 \
    L::kWave, L::kTilePositions, L::kAWords, L::kBWords, L::kAccElems, L::kAccRows, &L::a_row_live, &L::a_row, \
        &L::a_word, &L::lane_position, &L::b_chunk, &L::b_word, &L::acc_row, &L::acc_position,                 \
        &L::acc_row_index, &L::acc_row_element, &L::acc_rows_live                                              \
  }

// The kernel's 8 steps through a platform's index functions and a model of
// its instruction, over random tiles and every count of live rows: each
// lane's A words (zero for padding rows it skips), its page chunk's B words,
// then where each accumulator element lands.
template <class Model>
void expect_fragments_give_the_tile_product(const LaneLayout& l, const Model& model) {
  for (int live : {4, 8, 16})
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      SCOPED_TRACE("live rows " + std::to_string(live) + ", seed " + std::to_string(seed));
      const Tiles t = random_tiles(seed, live, l.tile_positions);
      Accs d(static_cast<std::size_t>(l.wave * 4), 0.0);
      for (int s = 0; s < tile::kSteps; ++s) {
        Regs a(static_cast<std::size_t>(l.wave * 4), 0u), b(static_cast<std::size_t>(l.wave * 2), 0u);
        for (int lane = 0; lane < l.wave; ++lane) {
          for (int r = 0; r < l.a_words; ++r)
            if (l.a_row_live(lane, r, live))
              a[static_cast<std::size_t>(lane * 4 + r)] =
                  t.stored[static_cast<std::size_t>(l.a_row(lane, r) * QueryLayout::kRowWords + l.a_word(lane, s, r))];
          for (int r = 0; r < l.b_words; ++r)
            b[static_cast<std::size_t>(lane * 2 + r)] =
                t.page[static_cast<std::size_t>(l.lane_position(lane) * 64 + 4 * l.b_chunk(lane, s) + l.b_word(s, r))];
        }
        model(a, b, d);
      }
      std::vector<double> got(static_cast<std::size_t>(16 * t.positions), 0.0);
      std::vector<int> hits(got.size(), 0);
      for (int lane = 0; lane < l.wave; ++lane)
        for (int e = 0; e < l.acc_elems; ++e) {
          const int row = l.acc_row(lane, e), pos = l.acc_position(lane, e);
          ASSERT_EQ(row, l.acc_row(lane, l.acc_row_element(l.acc_row_index(e))));
          got[static_cast<std::size_t>(row * t.positions + pos)] = d[static_cast<std::size_t>(lane * 4 + e)];
          ++hits[static_cast<std::size_t>(row * t.positions + pos)];
        }
      expect_tile_product(t, live, got, hits);
      // Every live row is held by some lane's live row index (the reduction skips the others).
      for (int row = 0; row < live; ++row) {
        bool held = false;
        for (int lane = 0; lane < l.wave; ++lane)
          for (int r = 0; r < l.acc_rows; ++r)
            held = held || (l.acc_rows_live(r, live) && l.acc_row(lane, l.acc_row_element(r)) == row);
        EXPECT_TRUE(held) << "row " << row;
      }
    }
}

TEST(MatrixLayouts, NvidiaFragmentsThroughTheMmaModelGiveTheTileProduct) {
  expect_fragments_give_the_tile_product(CTXSCORE_LANE_LAYOUT(tile::nvidia), nvidia_mma_model);
}

TEST(MatrixLayouts, AmdFragmentsThroughTheMfmaModelGiveTheTileProduct) {
  expect_fragments_give_the_tile_product(CTXSCORE_LANE_LAYOUT(tile::amd), amd_mfma_model);
}

// Each wave's n-tiles and each lane's chunks of them cover a page once;
// where the AMD stream loads chunk v of n-tile t is the chunk step 2v reads.
template <int kWaves, int kTilesPerWave, class FirstChunk, class StepChunk>
void expect_lanes_cover_the_page_once(int wave_size, const FirstChunk& first_chunk_offset, const StepChunk& step_chunk_offset) {
  std::vector<int> loads(kPageElems, 0);
  for (int wave = 0; wave < kWaves; ++wave)
    for (int t = 0; t < kTilesPerWave; ++t)
      for (int lane = 0; lane < wave_size; ++lane)
        for (int v = 0; v < 4; ++v) {
          const int at = first_chunk_offset(wave, t, lane) + 8 * v;
          ASSERT_GE(at, 0);
          ASSERT_LE(at + 8, kPageElems);
          for (int e = 0; e < 8; ++e) ++loads[static_cast<std::size_t>(at + e)];
          EXPECT_EQ(at, step_chunk_offset(wave, t, lane, 2 * v)) << "wave " << wave << " tile " << t << " lane " << lane;
          EXPECT_EQ(at, step_chunk_offset(wave, t, lane, 2 * v + 1));
        }
  for (int e = 0; e < kPageElems; ++e) ASSERT_EQ(loads[static_cast<std::size_t>(e)], 1) << "page element " << e;
}

TEST(MatrixLayouts, AmdLanesLoadEachPageElementOnceWhereTheirStepsReadIt) {
  namespace L = tile::amd;
  expect_lanes_cover_the_page_once<L::kWaves, L::kTilesPerWave>(
      L::kWave,
      [](int wave, int t, int lane) { return tile::page_chunk_offset(L::fragment_position(wave, t, lane), L::b_chunk(lane, 0)); },
      [](int wave, int t, int lane, int s) { return tile::page_chunk_offset(L::fragment_position(wave, t, lane), L::b_chunk(lane, s)); });
}

TEST(MatrixLayouts, NvidiaRingReadsFindWhatItsCopiesWrote) {
  namespace L = tile::nvidia;
  // The copies: thread tid moves chunk tid % 16 of row tid / 16 (+ 16 rows a pass) to ring_chunk.
  std::vector<int> ring(2048, -1);
  for (int tid = 0; tid < tile::kThreads; ++tid)
    for (int pass = 0; pass < 2048 / tile::kThreads; ++pass) {
      const int row = tid / 16 + pass * (tile::kThreads / 16), k = tid % 16;
      const int at = tile::ring_chunk(row, k);
      ASSERT_EQ(ring[static_cast<std::size_t>(at)], -1) << "two copies into ring chunk " << at;
      ring[static_cast<std::size_t>(at)] = row * 16 + k;
    }
  // The reads: n-tile t of a wave adds t · 8 rows to the address of n-tile 0's chunk.
  for (int wave = 0; wave < L::kWaves; ++wave)
    for (int t = 0; t < L::kTilesPerWave; ++t)
      for (int lane = 0; lane < L::kWave; ++lane)
        for (int s = 0; s < tile::kSteps; ++s) {
          const int pos = L::fragment_position(wave, t, lane), k = L::b_chunk(lane, s);
          const int read = tile::ring_chunk(L::fragment_position(wave, 0, lane), k) + t * L::kTilePositions * 16;
          ASSERT_EQ(ring[static_cast<std::size_t>(read)], pos * 16 + k) << "wave " << wave << " tile " << t << " lane " << lane;
        }
}

// The AMD register stream: the page in hand when slot j is scored is slot j's.
TEST(MatrixLayouts, AmdRegisterStreamHoldsEachSlotsPageWhenItIsScored) {
  test::run_property(100, [] {
    const std::int64_t first = *rc::gen::inRange<std::int64_t>(0, 64);
    const std::int64_t last = first + *rc::gen::inRange<std::int64_t>(1, 64);
    std::int64_t next = first;  // begin(): the first slot's page loads
    for (std::int64_t j = first; j < last; ++j) {
      const std::int64_t current = next;  // advance(j): the loaded page becomes current
      next = register_stream_next(j, last);
      RC_ASSERT(current == j);
      RC_ASSERT(next >= first && next < last);  // never a slot past the range
    }
  });
}

}  // namespace
}  // namespace ctxscore
