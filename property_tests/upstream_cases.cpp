// The three upstream tests of the contract (named cases of the registry),
// as regression tests of the reference. The first compares against an
// independent fp32 loop written here, with upstream's tolerance.
#include <gtest/gtest.h>

#include <cmath>

#include "ctxscore/harness/named_cases.hpp"
#include "scored_case.hpp"

namespace ctxscore {
namespace {

using harness::named_case;
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
    const Case& c = named_case("upstream_two_requests_rank" + std::to_string(rank)).spec;
    ASSERT_EQ(c.world, 2);
    ASSERT_EQ(c.local(), 2);  // slot 1 stays unwritten for both requests
    const auto s = score_case(c);
    const ScoresView o = s.host.out_layout();
    for (std::int64_t row = 0; row < 2; ++row)
      for (std::int64_t j = 0; j < 2; ++j)
        for (std::int64_t h = 0; h < c.heads; ++h) {
          const float got = s.host.out[static_cast<std::size_t>(o.offset(h, row, j))];
          if (j == 1) {
            EXPECT_EQ(got, -12345.0f) << "slot past scan written, rank " << rank;
            continue;
          }
          const std::int64_t b = j * 2 + rank;
          const float want = fp32_score(s.host, row, h, b, c.table_entry(row, b));
          ASSERT_TRUE(std::isfinite(want));  // QL = 1: every written block has a qualifying position
          EXPECT_NEAR(got, want, 2e-2 + 2e-2 * std::fabs(want)) << "rank " << rank << " row " << row << " head " << h;
          // The contract's derived bound as well: an fp32 sum in upstream's order lies within it of the exact score.
          const std::size_t e = static_cast<std::size_t>(s.ref.index(h, row, j));
          EXPECT_LE(std::fabs(static_cast<double>(want) - s.ref.exact[e]), s.ref.bound[e])
              << "rank " << rank << " row " << row << " head " << h << ": upstream's fp32 sum outside the derived bound";
        }
  }
}

TEST(UpstreamCases, BoundIndependenceWorld4Rank2) {
  std::vector<test::ScoredCase> scored;
  for (const char* name : {"upstream_bound_independence_S4000", "upstream_bound_independence_S8192",
                           "upstream_bound_independence_S65536"})
    scored.push_back(score_case(named_case(name).spec));
  const test::ScoredCase& tight = scored[0];
  for (std::size_t k = 1; k < scored.size(); ++k) {
    const test::ScoredCase& loose = scored[k];
    std::int64_t compared = 0;
    for (std::int64_t row = 0; row < 3; ++row)
      for (std::int64_t j = 0; j < loose.ref.slots; ++j) {
        const bool w = j < tight.ref.slots && tight.ref.is_written(row, j);
        ASSERT_EQ(w, loose.ref.is_written(row, j)) << "row " << row << " slot " << j;
        if (!w) continue;
        for (std::int64_t h = 0; h < 4; ++h, ++compared)
          ASSERT_EQ(float_bits(tight.host.out[static_cast<std::size_t>(tight.host.out_layout().offset(h, row, j))]),
                    float_bits(loose.host.out[static_cast<std::size_t>(loose.host.out_layout().offset(h, row, j))]));
      }
    // rank 2 of 4 over 8, 32 and 20 blocks: 2 + 8 + 5 slots, 4 heads each.
    EXPECT_EQ(compared, (2 + 8 + 5) * 4);
    // One out allocation for every bound: the whole buffers agree bitwise.
    EXPECT_EQ(tight.host.out.size(), loose.host.out.size());
  }
}

TEST(UpstreamCases, UnpopulatedBlockTable) {
  const Case& c = named_case("upstream_unpopulated_table").spec;
  ASSERT_EQ(c.pages, 1);
  const auto s = score_case(c);
  for (std::int64_t i = 0; i < 8; ++i)
    for (std::int64_t j = 0; j < 4; ++j) EXPECT_EQ(s.ref.page[static_cast<std::size_t>(i * 4 + j)], 0);
  for (float v : s.host.out) {
    EXPECT_NE(v, -12345.0f);  // every element of the packed out is a written slot
    EXPECT_TRUE(std::isfinite(v));
  }
}

}  // namespace
}  // namespace ctxscore
