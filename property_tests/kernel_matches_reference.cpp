// The HIP kernel equals the reference within the contract's bound, over
// random layouts, lengths, tables, ranks and chunkings (label gpu).
#include <gtest/gtest.h>
#include <iostream>
#include <rapidcheck.h>

#include "device_case.hpp"
#include "generators.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using test::check_kernel;

class Kernel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::gpu_present()) GTEST_SKIP() << test::gpu_absence_reason();
    test::kernel_stats() = {};
    test::set_stats_hook([] {
      std::string line = test::kernel_stats().str();
      test::kernel_stats() = {};
      return line;
    });
  }
  void TearDown() override {
    if (test::kernel_stats().cases > 0) std::cout << test::kernel_stats().str() << std::endl;
  }
};

// Asserts the kernel matches, recording the case for the fixture on failure.
void assert_matches(const Case& c) {
  const test::KernelVerdict v = check_kernel(c);
  if (!v.report.ok()) {
    test::note_failure(c, v.str());
    RC_FAIL(v.str());
  }
}

TEST_F(Kernel, MatchesReferenceOnRandomLayouts) {
  test::run_property(300, [] {
    const Case c = *gen::genCase(gen::gpu_case_limits(max_teams(), max_ring_pages()));
    gen::classify(c);
    assert_matches(c);
  });
}

TEST_F(Kernel, MatchesReferenceUnderForcedChunkings) {
  test::run_property(200, [] {
    Case c = *gen::genCase(gen::gpu_case_limits(max_teams(), max_ring_pages()));
    c.geometry = *gen::genGeometry(c.local(), max_teams(), max_ring_pages());
    RC_CLASSIFY(c.geometry->chunk == 1, "CHUNK = 1");
    RC_CLASSIFY(c.geometry->chunk >= c.local(), "CHUNK >= L");
    RC_CLASSIFY(c.geometry->grid_y * c.geometry->chunk >= c.local() + c.geometry->chunk, "extra programs");
    RC_CLASSIFY(c.geometry->teams == 0, "teams: the launcher's choice");
    RC_CLASSIFY(c.geometry->teams > 1, "teams: several, forced");
    RC_CLASSIFY(c.geometry->ring_pages == 0, "ring pages: the launcher's choice");
    RC_CLASSIFY(c.geometry->ring_pages > 1, "ring pages: several, forced");
    assert_matches(c);
  });
}

TEST_F(Kernel, MatchesReferenceOnTheM3Shapes) {
  test::run_property(100, [] {
    gen::CaseLimits lim = gen::gpu_case_limits(max_teams(), max_ring_pages());
    lim.min_heads = lim.max_heads = 4;
    lim.min_world = lim.max_world = 4;
    lim.min_query_len = lim.max_query_len = *rc::gen::element<std::int64_t>(1, 4);
    const Case c = *gen::genCase(lim);
    gen::classify(c);
    assert_matches(c);
  });
}

Case upstream_two_requests(std::int64_t rank) {
  Case c;
  c.label = "upstream_two_requests";
  c.seed = 11;
  c.heads = 2;
  c.world = 2;
  c.rank = rank;
  c.max_seq_len = 512;
  c.pages = 8;
  c.seq_lens = {130, 250};
  c.table_width = 4;
  c.table_row_stride = 4;
  c.block_table = {3, 5, 0, 0, 6, 1, 0, 0};
  return c.resolved();
}

TEST_F(Kernel, UpstreamTwoRequestsEachRank) {
  for (std::int64_t r = 0; r < 2; ++r) {
    const auto v = check_kernel(upstream_two_requests(r));
    EXPECT_TRUE(v.report.ok()) << v.str();
    EXPECT_GT(v.report.unwritten_checked, 0);
  }
}

TEST_F(Kernel, UpstreamBoundIndependenceIsBitwise) {
  std::vector<std::vector<float>> outs;
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
    c.out_rows = 3;
    c.out_slots = 128;  // one out layout for every bound
    c.out_slot_stride = 1;
    c.out_row_stride = 128;
    c.out_head_stride = 3 * 128;
    for (int e = 0; e < 3 * 512; ++e) c.block_table.push_back((e * 13) % 64);
    HostCase host = materialize(c.resolved());
    test::DeviceCase dev(host);
    indexer_context_scores(dev.args, nullptr);
    test::check(hipDeviceSynchronize(), "kernel");
    outs.push_back(dev.download_out());
    const auto v = check_kernel(c.resolved());
    EXPECT_TRUE(v.report.ok()) << v.str();
  }
  EXPECT_EQ(outs[0], outs[1]);
  EXPECT_EQ(outs[0], outs[2]);
}

Case unpopulated_table() {
  Case c;
  c.label = "upstream_unpopulated_table";
  c.seed = 33;
  c.heads = 4;
  c.world = 4;
  c.rank = 1;
  c.max_seq_len = 2048;
  c.pages = 1;
  c.seq_lens = std::vector<std::int32_t>(8, 2048);
  c.table_width = 16;
  c.table_row_stride = 16;
  c.block_table = std::vector<std::int32_t>(8 * 16, 1 << 20);
  return c.resolved();
}

TEST_F(Kernel, UpstreamUnpopulatedTable) {
  for (std::int64_t r = 0; r < 4; ++r) {
    Case c = unpopulated_table();
    c.rank = r;
    const auto v = check_kernel(c);
    EXPECT_TRUE(v.report.ok()) << v.str();
    EXPECT_EQ(v.report.written, 8 * 4 * 4);
  }
}

TEST_F(Kernel, ZeroTokensLaunchNothing) {
  Case c;
  c.seq_lens = {};
  c.table_width = 1;
  const auto v = check_kernel(c.resolved());
  EXPECT_FALSE(v.launch.launched);
  EXPECT_TRUE(v.report.ok()) << v.str();
}

TEST_F(Kernel, MissingOrShortOutScoresIntoAFreshBufferAndSaysSo) {
  Case c = upstream_two_requests(0);
  HostCase host = materialize(c);
  test::DeviceCase dev(host);
  ScoreArgs a = dev.args;
  a.out->shape[2] = 1;  // L = 2 needed
  const LaunchResult r = indexer_context_scores(a, nullptr);
  test::check(hipDeviceSynchronize(), "kernel");
  EXPECT_FALSE(r.used_given_out);
  EXPECT_NE(r.fresh_reason.find("fresh buffer"), std::string::npos) << r.fresh_reason;
  ASSERT_NE(r.fresh.data, nullptr);
  EXPECT_EQ(r.fresh.slots, 2);
  EXPECT_EQ(dev.download_out(), host.out) << "the short out was written";
}

// The kernel's shape (teams per program, pages per team's ring) changes who
// scores a slot and when, never a value: bitwise the same out under every
// shape the platform has, at a chunking where the teams' shares differ
// (CHUNK 5 over up to four teams) and one-page rings are reused, for each
// of the kernel instances by query rows read (4, 8, 16).
TEST_F(Kernel, KernelShapesDoNotChangeTheScores) {
  Case c;
  c.label = "kernel_shapes_do_not_change_scores";
  c.seed = 5;
  c.heads = 2;
  c.world = 2;
  c.rank = 1;
  c.max_seq_len = 4096;
  c.seq_lens = {4000, 2500};
  c.pages = 64;
  c.table_width = c.table_row_stride = 32;
  c.block_table.assign(64, 0);
  for (std::size_t e = 0; e < c.block_table.size(); ++e) c.block_table[e] = static_cast<std::int32_t>((e * 7) % 64);
  // H 2, 6 and 12 (QL 1) run the kernel instances reading 4, 8 and 16 query rows.
  for (const auto& [heads, live] : {std::pair{2, 4}, std::pair{6, 8}, std::pair{12, 16}}) {
    c.heads = heads;
    std::vector<std::vector<float>> outs;
    for (std::int64_t ring = 1; ring <= max_ring_pages(); ++ring)
      for (std::int64_t teams = 1; teams * ring <= max_teams(); ++teams) {
        c.geometry = GeometryOverride{5, 4, teams, ring};
        HostCase host = materialize(c.resolved());
        LaunchResult r;
        outs.push_back(test::run_kernel(host, nullptr, &r));
        EXPECT_EQ(r.teams, teams);
        EXPECT_EQ(r.ring_pages, ring);
        EXPECT_EQ(r.live_rows, live) << "H " << heads;
        const auto v = check_kernel(c.resolved());
        EXPECT_TRUE(v.report.ok()) << v.str();
        EXPECT_EQ(outs.back(), outs.front()) << "H " << heads << ", teams " << teams << ", ring pages " << ring;
      }
    EXPECT_EQ(outs.size(), max_ring_pages() == 2 ? max_teams() + max_teams() / 2 : max_teams());
  }
}

TEST_F(Kernel, UnsupportedKernelShapesAreRejected) {
  Case c = upstream_two_requests(0);
  HostCase host = materialize(c);
  test::DeviceCase dev(host);
  const auto expect_rejected = [&](GeometryOverride g, const std::string& message) {
    try {
      indexer_context_scores(dev.args, nullptr, g);
      ADD_FAILURE() << "teams " << g.teams << ", ring pages " << g.ring_pages << " accepted";
    } catch (const ContractError& e) {
      EXPECT_EQ(e.clause(), Clause::geometry_override);
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  const std::int64_t most_teams = max_teams(), most_ring = max_ring_pages();
  for (std::int64_t teams : {std::int64_t{-1}, most_teams + 1})
    expect_rejected(GeometryOverride{1, 2, teams, 0}, "geometry.teams: got " + std::to_string(teams));
  for (std::int64_t ring : {std::int64_t{-1}, most_ring + 1})
    expect_rejected(GeometryOverride{1, 2, 0, ring}, "geometry.ring_pages: got " + std::to_string(ring));
  if (most_ring > 1)
    expect_rejected(GeometryOverride{1, 2, most_teams, most_ring},
                    "geometry.teams: got " + std::to_string(most_teams) + " with geometry.ring_pages " +
                        std::to_string(most_ring) + ", expected teams * ring pages <= " + std::to_string(most_teams));
}

TEST_F(Kernel, HostTensorsAreRejected) {
  Case c = upstream_two_requests(0);
  HostCase host = materialize(c);
  try {
    indexer_context_scores(host.args(), nullptr);
    FAIL() << "host tensors accepted";
  } catch (const ContractError& e) {
    EXPECT_EQ(e.clause(), Clause::same_device);
    EXPECT_NE(std::string(e.what()).find("host:0"), std::string::npos) << e.what();
  }
}

TEST_F(Kernel, SixtyFourBitPageOffsets) {
  // 2^17 + 8 pages: a 4 GiB+ cache, page ids near P − 1 (offsets past 2^31 elements).
  Case c;
  c.label = "cache_over_4GiB";
  c.seed = 64;
  c.heads = 4;
  c.query_len = 2;
  c.world = 2;
  c.rank = 1;
  c.max_seq_len = 1024;
  c.pages = (std::int64_t{1} << 17) + 8;
  c.seq_lens = {1024, 700, 129};
  c.table_width = 8;
  c.table_row_stride = 8;
  const std::int32_t top = static_cast<std::int32_t>(c.pages - 1);
  for (int i = 0; i < 3; ++i)
    for (int b = 0; b < 8; ++b) c.block_table.push_back(b % 3 == 0 ? top - b : (b % 3 == 1 ? top + 5 : 1 << 20));
  const auto v = check_kernel(c.resolved());
  EXPECT_TRUE(v.report.ok()) << v.str();
  EXPECT_GT(v.report.written_finite, 0);
}

}  // namespace
}  // namespace ctxscore
