// What only the project's own kernel and launcher promise beyond the
// contract: what they say about a fresh buffer, that kernel shapes never
// change a value, that unsupported shapes and host tensors are rejected by
// name, 64-bit page offsets, and nothing recorded into a capture that fails
// (label gpu).
#include <gtest/gtest.h>

#include "context_score.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/device.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "gpu_backend.hpp"

namespace ctxscore {
namespace {

using harness::CaseBuilder;
using harness::DeviceCase;

class HipKernel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = harness::gpu_absence_reason(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
    check_hip(hipStreamCreate(&stream), "hipStreamCreate");
  }
  void TearDown() override {
    if (stream) (void)hipStreamDestroy(stream);
  }
  std::vector<float> run(HostCase& host, LaunchResult* launch = nullptr) {
    DeviceCase dev(host);
    LaunchResult r = indexer_context_scores(dev.args, stream, host.spec.geometry);
    check_hip(hipStreamSynchronize(stream), "kernel");
    if (launch) *launch = std::move(r);
    return dev.download_out();
  }
  hipStream_t stream = nullptr;
};

const Case& two_requests() { return harness::named_case("upstream_two_requests_rank0").spec; }

TEST_F(HipKernel, MissingOrShortOutScoresIntoAFreshBufferAndSaysSo) {
  HostCase host = materialize(two_requests());
  DeviceCase dev(host);
  ScoreArgs a = dev.args;
  a.out->shape[2] = 1;  // L = 2 needed
  const LaunchResult r = indexer_context_scores(a, stream);
  check_hip(hipStreamSynchronize(stream), "kernel");
  EXPECT_FALSE(r.used_given_out);
  EXPECT_NE(r.fresh_reason.find("fresh buffer"), std::string::npos) << r.fresh_reason;
  ASSERT_NE(r.fresh.data, nullptr);
  EXPECT_EQ(r.fresh.slots, 2);
  EXPECT_EQ(dev.download_out(), host.out) << "the short out was written";
  a.out.reset();
  const LaunchResult none = indexer_context_scores(a, stream);
  check_hip(hipStreamSynchronize(stream), "kernel");
  EXPECT_EQ(none.fresh_reason, "no out given");
}

TEST_F(HipKernel, ZeroTokensLaunchNothing) {
  HostCase host = materialize(CaseBuilder("zero_tokens").lens({}).build());
  LaunchResult r;
  run(host, &r);
  EXPECT_FALSE(r.launched);
}

// The kernel's shape (teams per program, pages per team's ring) changes who
// scores a slot and when, never a value: bitwise the same out under every
// shape the platform has, at a chunking where the teams' shares differ
// (CHUNK 5 over up to four teams) and one-page rings are reused, for each
// of the kernel instances by query rows read (4, 8, 16).
TEST_F(HipKernel, KernelShapesDoNotChangeTheScores) {
  const std::unique_ptr<harness::Backend> hip = harness::make_backend("hip");
  std::vector<std::int32_t> table(64);
  for (std::size_t e = 0; e < table.size(); ++e) table[e] = static_cast<std::int32_t>((e * 7) % 64);
  // H 2, 6 and 12 (QL 1) run the kernel instances reading 4, 8 and 16 query rows.
  for (const auto& [heads, live] : {std::pair{2, 4}, std::pair{6, 8}, std::pair{12, 16}}) {
    std::vector<std::vector<float>> outs;
    for (std::int64_t ring = 1; ring <= max_ring_pages(); ++ring)
      for (std::int64_t teams = 1; teams * ring <= max_teams(); ++teams) {
        const Case c = CaseBuilder("kernel_shapes_do_not_change_scores")
                           .seed(5).heads(heads).world(2).rank(1).bound(4096).pages(64).lens({4000, 2500})
                           .table(table, 32).geometry(GeometryOverride{5, 4, teams, ring}).build();
        HostCase host = materialize(c);
        LaunchResult r;
        outs.push_back(run(host, &r));
        EXPECT_EQ(r.teams, teams);
        EXPECT_EQ(r.ring_pages, ring);
        EXPECT_EQ(r.live_rows, live) << "H " << heads;
        const harness::Verdict v = harness::run_and_judge(*hip, c);
        EXPECT_TRUE(v.ok()) << v.str();
        EXPECT_EQ(outs.back(), outs.front()) << "H " << heads << ", teams " << teams << ", ring pages " << ring;
      }
    EXPECT_EQ(static_cast<std::int64_t>(outs.size()), max_ring_pages() == 2 ? max_teams() + max_teams() / 2 : max_teams());
  }
}

TEST_F(HipKernel, UnsupportedKernelShapesAreRejected) {
  HostCase host = materialize(two_requests());
  DeviceCase dev(host);
  const auto expect_rejected = [&](GeometryOverride g, const std::string& message) {
    try {
      indexer_context_scores(dev.args, stream, g);
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

TEST_F(HipKernel, HostTensorsAreRejected) {
  HostCase host = materialize(two_requests());
  try {
    indexer_context_scores(host.args(), stream);
    FAIL() << "host tensors accepted";
  } catch (const ContractError& e) {
    EXPECT_EQ(e.clause(), Clause::same_device);
    EXPECT_NE(std::string(e.what()).find("host:0"), std::string::npos) << e.what();
  }
}

TEST_F(HipKernel, SixtyFourBitPageOffsets) {
  // 2^17 + 8 pages: a 4 GiB+ cache, page ids near P − 1 (offsets past 2^31 elements).
  const std::int64_t pages = (std::int64_t{1} << 17) + 8;
  const std::int32_t top = static_cast<std::int32_t>(pages - 1);
  std::vector<std::int32_t> table;
  for (int i = 0; i < 3; ++i)
    for (int b = 0; b < 8; ++b) table.push_back(b % 3 == 0 ? top - b : (b % 3 == 1 ? top + 5 : 1 << 20));
  const Case c = CaseBuilder("cache_over_4GiB").seed(64).heads(4).query_len(2).world(2).rank(1).bound(1024)
                     .pages(pages).lens({1024, 700, 129}).table(table, 8).build();
  const harness::Verdict v = harness::run_and_judge(*harness::make_backend("hip"), c);
  EXPECT_TRUE(v.ok()) << v.str();
  EXPECT_GT(v.report.written_finite, 0);
}

TEST_F(HipKernel, OutThatDoesNotFitIsAnErrorAndNothingIsCaptured) {
  const Case dummy = CaseBuilder("capture_dummy_fixed").heads(4).world(4).rank(1).bound(65536).pages(32)
                         .lens(std::vector<std::int32_t>(4, 1)).table(harness::every_entry(3)).build();
  HostCase host = materialize(dummy);
  DeviceCase dev(host);
  ScoreArgs a = dev.args;
  a.out->shape[1] = 1;  // 4 tokens needed
  check_hip(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal), "hipStreamBeginCapture");
  std::string message;
  try {
    indexer_context_scores(a, stream);
  } catch (const ContractError& e) {
    EXPECT_EQ(e.clause(), Clause::out_in_capture);
    message = e.what();
  }
  hipGraph_t graph = nullptr;
  check_hip(hipStreamEndCapture(stream, &graph), "hipStreamEndCapture");
  std::size_t nodes = 99;
  check_hip(hipGraphGetNodes(graph, nullptr, &nodes), "hipGraphGetNodes");
  (void)hipGraphDestroy(graph);
  EXPECT_EQ(nodes, 0u) << "something was recorded into the capture";
  EXPECT_NE(message.find("[4, 1, 128]"), std::string::npos) << message;
  EXPECT_NE(message.find(">=tokens=4"), std::string::npos) << message;
  EXPECT_NE(message.find(">=local=128"), std::string::npos) << message;
}

}  // namespace
}  // namespace ctxscore
