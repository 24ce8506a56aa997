// The launch geometry: every slot covered, no program empty by geometry
// alone, CHUNK a power of two, the grid bounded by the target.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include "ctxscore/contract.hpp"

namespace ctxscore {
namespace {

bool is_pow2(std::int64_t x) { return x >= 1 && (x & (x - 1)) == 0; }

// Every geometry claim for the geometry the kernel launches, launch_geometry's
// (never a re-derivation): "" or the broken claim.
std::string geometry_violation(std::int64_t batch, const Geometry& g) {
  const std::int64_t local = g.local;
  if (g.grid_x != batch) return "grid_x is not the batch";
  if (g.chunks < 1 || g.chunks > max64(local, 1)) return "chunk count outside [1, L]";
  if (g.grid_y * g.chunk < local) return "slots dropped: grid_y*CHUNK < L";
  if ((g.grid_y - 1) * g.chunk >= local) return "a program empty by geometry: (grid_y-1)*CHUNK >= L";
  if (!is_pow2(g.chunk)) return "CHUNK not a power of two";
  if ((g.chunks - 1) * ceil_div(local, g.chunks) >= local) return "chunk count leaves a program empty before rounding";
  if (batch * g.grid_y > max64(kTargetGrid, batch)) return "grid exceeds the target";
  if (g.grid_y > kTargetGrid) return "grid_y exceeds the target";
  return "";
}

TEST(Geometry, ExhaustiveBatchTimesLocalSlots) {
  // batch 1..4096 × local slots 1..8192 (world 1, S = 128·L): 33.5M points, a few seconds.
  std::int64_t checked = 0;
  for (std::int64_t batch = 1; batch <= 4096; ++batch)
    for (std::int64_t local = 1; local <= 8192; ++local, ++checked) {
      const Geometry g = launch_geometry(batch, local * kBlockTokens, 1, 4, 1);
      if (g.local != local) FAIL() << "launch_geometry gives L=" << g.local << " for S=" << local * kBlockTokens << ", world 1";
      const std::string v = geometry_violation(batch, g);
      if (!v.empty()) FAIL() << v << " at batch=" << batch << " local=" << local;
    }
  EXPECT_EQ(checked, 4096 * 8192);
}

RC_GTEST_PROP(Geometry, RandomPointsUpTo2Pow20, ()) {
  const auto batch = *rc::gen::inRange<std::int64_t>(1, (1 << 20) + 1);
  const auto bound = *rc::gen::inRange<std::int64_t>(1, (std::int64_t{1} << 27) + 1);
  const auto world = *rc::gen::inRange<std::int64_t>(1, 17);
  const Geometry g = launch_geometry(batch, bound, world, 4, 1);
  RC_CLASSIFY(batch > kTargetGrid, "batch past the target grid");
  RC_CLASSIFY(g.local > 8192, "local past the exhaustive range");
  RC_ASSERT(g.local == ceil_div(ceil_div(bound, kBlockTokens), world));  // §4's L, restated
  const std::string v = geometry_violation(batch, g);
  RC_ASSERT(v == "");
}

RC_GTEST_PROP(Geometry, DependsOnShapesNeverOnLengths, ()) {
  // launch_geometry takes no lengths at all; the dummy-batch bug is sizing S
  // from them. Sizing S = 1 collapses the grid to one slot.
  const auto batch = *rc::gen::inRange<std::int64_t>(1, 257);
  const auto bound = *rc::gen::inRange<std::int64_t>(129, (1 << 20) + 1);
  const auto world = *rc::gen::inRange<std::int64_t>(1, 17);
  const Geometry dummy = launch_geometry(batch, 1, world, 4, 1);
  RC_ASSERT(dummy.local == 1);
  RC_ASSERT(dummy.grid_y == 1);
  const Geometry g = launch_geometry(batch, bound, world, 4, 1);
  RC_ASSERT(g.grid_y * g.chunk >= g.local);
}

struct Point {
  std::int64_t batch, max_seq_len, world, heads, query_len;
  std::int64_t global, local, chunks, chunk, grid_y, tile_n;
};

TEST(Geometry, HandComputedPoints) {
  // Worked by hand from the contract's formula; see the comment per row.
  const Point points[] = {
      // S=1: G=1, L=1, one slot, CHUNK 1.
      {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 16},
      // 1M context, world 4: L=2048; target 16384 -> 2048 -> ceil(2048/3)=683; round trip 683;
      // CHUNK = next_pow2(ceil(2048/683)=3) = 4; grid_y = 512. H·QL = 4 -> N = 16.
      {1, 1 << 20, 4, 4, 1, 8192, 2048, 683, 4, 512, 16},
      // batch 8, 128K, world 4: L=256; target 2048 -> 256 -> 86; CHUNK 4; grid_y 64. H·QL=16.
      {8, 131072, 4, 4, 4, 1024, 256, 86, 4, 64, 16},
      // batch 64, 32K, world 4: L=64; target 256 -> 64 -> 22; CHUNK 4; grid_y 16. H·QL=17 -> N=32.
      {64, 32768, 4, 17, 1, 256, 64, 22, 4, 16, 32},
      // batch 256, 128K, world 4: L=256; target 64 -> 64; min(64, 86)=64; round trip 64; CHUNK 4.
      {256, 131072, 4, 4, 1, 1024, 256, 64, 4, 64, 16},
      // batch 4096, 1M, world 1: L=8192; target 4; round trip ceil(8192/2048)=4; CHUNK 2048.
      {4096, 1 << 20, 1, 16, 8, 8192, 8192, 4, 2048, 4, 128},
      // batch 20000 > target: target 1 -> one chunk; CHUNK = next_pow2(L=1000) = 1024.
      {20000, 128000, 1, 1, 1, 1000, 1000, 1, 1024, 1, 16},
      // L=5, batch 1: min(5, ceil(5/3)=2) = 2; CHUNK = next_pow2(3) = 4; grid_y 2.
      {1, 640, 1, 2, 1, 5, 5, 2, 4, 2, 16},
      // L=7: 3 chunks, CHUNK = next_pow2(3) = 4, so only 2 programs.
      {1, 896, 1, 1, 1, 7, 7, 3, 4, 2, 16},
      // batch 2048 (target 8), L=25: 8; round trip ceil(25/8)=4 -> ceil(25/4)=7; CHUNK 4; grid_y 7.
      {2048, 3200, 1, 1, 1, 25, 25, 7, 4, 7, 16},
      // world 16 over 3 blocks: L = 1; rank 15 owns nothing past block 15.
      {1, 300, 16, 1, 1, 3, 1, 1, 1, 1, 16},
  };
  for (const Point& p : points) {
    const Geometry g = launch_geometry(p.batch, p.max_seq_len, p.world, p.heads, p.query_len);
    SCOPED_TRACE("batch=" + std::to_string(p.batch) + " S=" + std::to_string(p.max_seq_len) +
                 " world=" + std::to_string(p.world));
    EXPECT_EQ(g.global, p.global);
    EXPECT_EQ(g.local, p.local);
    EXPECT_EQ(g.chunks, p.chunks);
    EXPECT_EQ(g.chunk, p.chunk);
    EXPECT_EQ(g.grid_x, p.batch);
    EXPECT_EQ(g.grid_y, p.grid_y);
    EXPECT_EQ(g.tile_n, p.tile_n);
  }
}

TEST(Geometry, SlotFormulasAtHandPoints) {
  // Request of 250 tokens, S = 8192 (G = 64), world 4: end = 2 blocks.
  EXPECT_EQ(reach_blocks(250, 64), 2);
  EXPECT_EQ(scan_slots(250, 64, 16, 0, 4), 1);  // block 0
  EXPECT_EQ(scan_slots(250, 64, 16, 1, 4), 1);  // block 1
  EXPECT_EQ(scan_slots(250, 64, 16, 2, 4), 0);  // a high rank with nothing
  EXPECT_EQ(scan_slots(0, 64, 16, 0, 4), 0);
  EXPECT_EQ(scan_slots(-5, 64, 16, 0, 4), 0);
  EXPECT_EQ(scan_slots(1 << 30, 64, 16, 3, 4), 16);  // clamped by the bound
  EXPECT_EQ(block_of_slot(3, 2, 4), 14);
  EXPECT_EQ(causal_cutoff(130, 4, 0), 127);
  EXPECT_EQ(causal_cutoff(130, 4, 3), 130);
  EXPECT_EQ(qualifying_prefix(1, 130), 2);    // block 1 of a row that reaches position 129
  EXPECT_EQ(qualifying_prefix(2, 130), 0);    // a block the row does not reach
  EXPECT_EQ(qualifying_prefix(0, 1000), 128);  // a block the row reaches whole
  EXPECT_EQ(clamp_page(-1, 5), 0);
  EXPECT_EQ(clamp_page(5, 5), 4);
  EXPECT_EQ(clamp_page(INT32_MIN, 5), 0);
  EXPECT_EQ(clamp_page(3, 5), 3);
  EXPECT_EQ(scale_fp32(1.0), 1.4426950409f);
  EXPECT_EQ(program_slots(2, 4, 10).first, 8);
  EXPECT_EQ(program_slots(2, 4, 10).last, 10);
  EXPECT_TRUE(program_slots(3, 4, 10).empty());
}

}  // namespace
}  // namespace ctxscore
