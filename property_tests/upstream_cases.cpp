// The three upstream tests of the contract, as named regression tests of the
// reference. The first compares against an independent fp32 loop written
// here, with upstream's tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "scored_case.hpp"

namespace ctxscore {
namespace {

using test::float_bits;
using test::score_case;

// Plain fp32 score of one (request, token, head, block), as upstream's test computes it.
float fp32_score(const HostCase& h, std::int64_t row, std::int64_t head, std::int64_t block, std::int64_t page) {
  const Case& c = h.spec;
  const std::int64_t i = row / c.query_len, t = row % c.query_len;
  const std::int64_t cutoff = c.seq_lens[static_cast<std::size_t>(i)] - c.query_len + t + 1;
  const float scale = static_cast<float>(c.sm_scale * 1.4426950409);
  float best = -INFINITY;
  for (std::int64_t pos = 0; pos < 128 && block * 128 + pos < cutoff; ++pos) {
    float acc = 0.0f;
    for (std::int64_t d = 0; d < 128; ++d)
      acc += static_cast<float>(h.cache[static_cast<std::size_t>(page * 16384 + pos * 128 + d)]) *
             static_cast<float>(h.q[static_cast<std::size_t>(row * c.q_token_stride + head * c.q_head_stride + d)]);
    best = std::fmax(best, acc * scale);
  }
  return best;
}

TEST(UpstreamCases, TwoRequestsWorld2EachRank) {
  for (std::int64_t rank = 0; rank < 2; ++rank) {
    Case c;
    c.label = "upstream_two_requests";
    c.seed = 11;
    c.heads = 2;
    c.world = 2;
    c.rank = rank;
    c.max_seq_len = 512;  // G = 4, L = 2: slot 1 stays unwritten for both requests
    c.pages = 8;
    c.seq_lens = {130, 250};
    c.table_width = 4;
    c.table_row_stride = 4;
    c.block_table = {3, 5, 0, 0, 6, 1, 0, 0};
    const auto s = score_case(c.resolved());
    const ScoresView o = s.host.out_layout();
    for (std::int64_t row = 0; row < 2; ++row)
      for (std::int64_t j = 0; j < 2; ++j)
        for (std::int64_t h = 0; h < 2; ++h) {
          const float got = s.host.out[static_cast<std::size_t>(o.offset(h, row, j))];
          if (j == 1) {
            EXPECT_EQ(got, -12345.0f) << "slot past scan written, rank " << rank;
            continue;
          }
          const std::int64_t b = j * 2 + rank;
          const float want = fp32_score(s.host, row, h, b, c.block_table[static_cast<std::size_t>(row * 4 + b)]);
          ASSERT_TRUE(std::isfinite(want));  // QL = 1: every written block has a qualifying position
          EXPECT_NEAR(got, want, 2e-2 + 2e-2 * std::fabs(want)) << "rank " << rank << " row " << row << " head " << h;
        }
  }
}

TEST(UpstreamCases, BoundIndependenceWorld4Rank2) {
  std::vector<ShardScores> shards;
  std::vector<HostCase> hosts;
  for (std::int64_t bound : {4000, 8192, 65536}) {
    Case c;
    c.label = "upstream_bound_independence";
    c.seed = 22;
    c.heads = 4;
    c.world = 4;
    c.rank = 2;
    c.max_seq_len = bound;
    c.pages = 64;
    c.seq_lens = {1000, 4000, 2500};
    c.table_width = 512;
    c.table_row_stride = 512;
    for (int e = 0; e < 3 * 512; ++e) c.block_table.push_back((e * 13) % 64);
    auto s = score_case(c.resolved());
    hosts.push_back(std::move(s.host));
    shards.push_back(std::move(s.ref));
  }
  const ShardScores& tight = shards[0];
  for (std::size_t k = 1; k < shards.size(); ++k) {
    const ScoresView ot = hosts[0].out_layout(), ok = hosts[k].out_layout();
    std::int64_t compared = 0;
    for (std::int64_t row = 0; row < 3; ++row)
      for (std::int64_t j = 0; j < shards[k].slots; ++j) {
        const bool w = j < tight.slots && tight.is_written(row, j);
        ASSERT_EQ(w, shards[k].is_written(row, j)) << "row " << row << " slot " << j;
        if (!w) continue;
        for (std::int64_t h = 0; h < 4; ++h, ++compared)
          ASSERT_EQ(float_bits(hosts[0].out[static_cast<std::size_t>(ot.offset(h, row, j))]),
                    float_bits(hosts[k].out[static_cast<std::size_t>(ok.offset(h, row, j))]));
      }
    // rank 2 of 4 over 8, 32 and 20 blocks: 2 + 8 + 5 slots, 4 heads each.
    EXPECT_EQ(compared, (2 + 8 + 5) * 4);
  }
}

TEST(UpstreamCases, UnpopulatedBlockTable) {
  Case c;
  c.label = "upstream_unpopulated_table";
  c.seed = 33;
  c.heads = 4;
  c.world = 4;
  c.rank = 1;
  c.max_seq_len = 2048;  // G = 16, L = 4
  c.pages = 1;
  c.seq_lens = std::vector<std::int32_t>(8, 2048);
  c.table_width = 16;
  c.table_row_stride = 16;
  c.block_table = std::vector<std::int32_t>(8 * 16, 1 << 20);
  const auto s = score_case(c.resolved());
  for (std::int64_t i = 0; i < 8; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(s.ref.page[static_cast<std::size_t>(i * 4 + j)], 0);
  for (float v : s.host.out) {
    EXPECT_NE(v, -12345.0f);  // every element of the packed out is a written slot
    EXPECT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace ctxscore
