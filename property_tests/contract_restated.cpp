// The contract's formulas (contract.hpp) against CONTRACT.md's words,
// restated here without calling any of them: blocks counted one by one,
// positions tested one by one, ids clamped with std::clamp, SCALE as the
// upstream product rounded once. The reference, the kernel's address plan
// and the plain-loop scorer all call contract.hpp, so their agreement cannot
// see a wrong formula there; this can.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "ctxscore/contract.hpp"

namespace ctxscore {
namespace {

// Bounds around block edges, where an off-by-one shows.
const std::vector<std::int64_t> kBounds = {1, 2, 127, 128, 129, 255, 256, 257, 383, 384, 385, 1000, 1024, 1025, 2047, 2049};

TEST(Contract, SlotFormulasCountBlockByBlock) {
  std::int64_t checked = 0;
  for (const std::int64_t S : kBounds) {
    std::int64_t G = 0;  // blocks of 128 tokens holding a position below S
    while (G * 128 < S) ++G;
    ASSERT_EQ(global_blocks(S), G) << "S " << S;
    for (std::int64_t world = 1; world <= 16; ++world) {
      std::int64_t L = 0;  // the most blocks any rank owns: rank 0's
      for (std::int64_t b = 0; b < G; b += world) ++L;
      ASSERT_EQ(local_slots(G, world), L) << "S " << S << " world " << world;
      for (std::int64_t rank = 0; rank < world; ++rank) {
        std::vector<std::int64_t> owned;  // the rank's blocks, in slot order
        for (std::int64_t b = 0; b < G; ++b)
          if (b % world == rank) owned.push_back(b);
        for (std::size_t j = 0; j < owned.size(); ++j)
          ASSERT_EQ(block_of_slot(static_cast<std::int64_t>(j), rank, world), owned[j]);
        for (std::int64_t len = -130; len <= S + 260; ++len) {
          std::int64_t reached = 0, scanned = 0;  // blocks with a token below len; those the rank owns
          for (std::int64_t b = 0; b < G; ++b)
            if (b * 128 < len) {
              ++reached;
              if (b % world == rank) ++scanned;
            }
          ASSERT_EQ(std::max<std::int64_t>(reach_blocks(len, G), 0), reached) << "len " << len << " S " << S;
          ASSERT_EQ(scan_slots(len, G, L, rank, world), scanned)
              << "len " << len << " S " << S << " world " << world << " rank " << rank;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000000);
}

// Query token t of a request of `len` tokens and QL query tokens sits at
// position len − QL + t; it sees the positions at or before its own.
TEST(Contract, CausalReachCountsPositionByPosition) {
  for (std::int64_t len = -5; len <= 700; ++len)
    for (std::int64_t ql = 1; ql <= 5; ++ql)
      for (std::int64_t t = 0; t < ql; ++t) {
        const std::int64_t at = len - ql + t;
        const std::int64_t cutoff = causal_cutoff(len, ql, t);
        for (std::int64_t block = 0; block < 7; ++block) {
          std::int64_t seen = 0;
          for (std::int64_t pos = 0; pos < 128; ++pos) {
            const bool sees = block * 128 + pos <= at;
            ASSERT_EQ(position_qualifies(block, pos, cutoff), sees)
                << "len " << len << " QL " << ql << " token " << t << " block " << block << " pos " << pos;
            seen += sees;
          }
          ASSERT_EQ(qualifying_prefix(block, cutoff), seen) << "len " << len << " QL " << ql << " token " << t;
        }
      }
}

TEST(Contract, PageIdsClampIntoTheCache) {
  const std::int64_t ids[] = {INT32_MIN, -(1 << 20), -7, -1, 0, 1, 2, 3, 5, 17, 1 << 20, INT32_MAX};
  for (std::int64_t pages = 1; pages <= 20; ++pages)
    for (const std::int64_t id : ids)
      ASSERT_EQ(clamp_page(id, pages), std::clamp<std::int64_t>(id, 0, pages - 1)) << "id " << id << " P " << pages;
}

// SCALE: upstream multiplies two Python floats, sm_scale and the literal
// 1.4426950409, and the kernel's fp32 arithmetic rounds the product once.
TEST(Contract, ScaleIsTheUpstreamProductRoundedOnce) {
  std::mt19937_64 rng(7);
  std::vector<double> scales = {1.0, 0.0625, 0.08838834764831845, -0.08838834764831845, 1e-6, 16.0};
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  for (int k = 0; k < 20000; ++k) scales.push_back(std::ldexp(mantissa(rng), static_cast<int>(rng() % 40) - 30));
  for (const double s : scales) {
    const double product = s * 1.4426950409;
    ASSERT_EQ(scale_fp32(s), static_cast<float>(product)) << "sm_scale " << s;
  }
}

}  // namespace
}  // namespace ctxscore
