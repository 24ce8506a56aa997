// The capture-bound rule: a graph captured on a one-token dummy batch at the
// stable bound replays correctly for every later batch written into the same
// buffers; sized from the dummy's own length, it does not, and the harness
// says so (label gpu).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "ctxscore/score.hpp"
#include "device_case.hpp"
#include "generators.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using test::check;

class Capture : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::gpu_present()) GTEST_SKIP() << test::gpu_absence_reason();
    check(hipStreamCreate(&stream), "hipStreamCreate");
  }
  void TearDown() override {
    if (stream) (void)hipStreamDestroy(stream);
  }
  hipStream_t stream = nullptr;
};

// A captured launch over fixed device buffers.
struct CapturedScore {
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;
  ~CapturedScore() {
    if (exec) (void)hipGraphExecDestroy(exec);
    if (graph) (void)hipGraphDestroy(graph);
  }
};

void capture(CapturedScore& g, const ScoreArgs& args, hipStream_t stream) {
  check(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal), "hipStreamBeginCapture");
  try {
    indexer_context_scores(args, stream);
  } catch (...) {
    hipGraph_t discarded = nullptr;
    (void)hipStreamEndCapture(stream, &discarded);
    if (discarded) (void)hipGraphDestroy(discarded);
    throw;
  }
  check(hipStreamEndCapture(stream, &g.graph), "hipStreamEndCapture");
  check(hipGraphInstantiateWithFlags(&g.exec, g.graph, 0), "hipGraphInstantiateWithFlags");
}

// A real batch with the dummy's shapes (B, H, QL, world, rank, S, P, table width).
Case real_batch(const Case& shape) {
  Case c = shape;
  c.label = "capture_replay";
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  for (std::int32_t& len : c.seq_lens) len = *gen::genSeqLen(c.max_seq_len, c.query_len);
  c.block_table = *gen::genPageTable(c.batch(), c.table_width, c.pages);
  return c;
}

// Replays `g` over a real batch refilled into `dev`; the reference scores
// the real batch at `bound`.
CompareReport replay(const CapturedScore& g, test::DeviceCase& dev, Case real, std::int64_t bound,
                     hipStream_t stream) {
  HostCase host = materialize(real);
  const std::vector<float> before = host.out;
  dev.refill(host, stream);
  check(hipGraphLaunch(g.exec, stream), "hipGraphLaunch");
  check(hipStreamSynchronize(stream), "replay");
  const std::vector<float> after = dev.download_out();
  real.max_seq_len = bound;
  HostCase judged = materialize(real);
  const ShardScores ref = score_shard(judged.args());
  return compare(ref, judged.out_layout(), before.data(), after.data(), static_cast<std::int64_t>(after.size()));
}

Case dummy_shape() {
  Case c;
  c.label = "capture_dummy";
  c.heads = *rc::gen::element<std::int64_t>(1, 4, 16);
  c.query_len = *rc::gen::element<std::int64_t>(1, 4);
  c.world = *rc::gen::element<std::int64_t>(1, 4, 16);
  c.rank = *rc::gen::inRange<std::int64_t>(0, c.world);
  c.max_seq_len = *rc::gen::element<std::int64_t>(4096, 32768, 65536);
  c.pages = 32;
  c.seq_lens = std::vector<std::int32_t>(static_cast<std::size_t>(*rc::gen::inRange(1, 17)), 1);  // one token each
  c.table_width = c.global();
  c.table_row_stride = c.table_width;
  c.block_table = std::vector<std::int32_t>(static_cast<std::size_t>(c.batch() * c.table_width), 0);
  return c.resolved();
}

TEST_F(Capture, DummyBatchAtTheStableBoundReplaysEveryBatch) {
  hipStream_t s = stream;
  test::run_property(40, [s] {
    const Case dummy = dummy_shape();
    HostCase host = materialize(dummy);
    test::DeviceCase dev(host);
    CapturedScore g;
    capture(g, dev.args, s);
    for (int k = 0; k < 3; ++k) {
      const Case real = real_batch(dummy);
      const CompareReport r = replay(g, dev, real, dummy.max_seq_len, s);
      if (!r.ok()) {
        test::note_failure(real, r.summary());
        RC_FAIL("replay " + std::to_string(k) + ": " + r.summary());
      }
    }
  });
}

// Four one-token requests at the bound 65536, world 4, rank 1.
Case fixed_dummy() {
  Case dummy;
  dummy.label = "capture_dummy_fixed";
  dummy.heads = 4;
  dummy.world = 4;
  dummy.rank = 1;
  dummy.max_seq_len = 65536;
  dummy.pages = 32;
  dummy.seq_lens = std::vector<std::int32_t>(4, 1);
  dummy.table_width = dummy.global();
  dummy.table_row_stride = dummy.table_width;
  dummy.block_table = std::vector<std::int32_t>(static_cast<std::size_t>(4 * dummy.table_width), 3);
  return dummy.resolved();
}

TEST_F(Capture, BoundSizedFromTheDummyIsCaught) {
  // Negative control: the capture-bound bug must be reported as a mismatch.
  // With S = 1 rank 0 scores only slot 0 of each request, every other rank nothing.
  for (std::int64_t rank : {0, 1}) {
    Case dummy = fixed_dummy();
    dummy.rank = rank;
    HostCase host = materialize(dummy);
    test::DeviceCase dev(host);
    ScoreArgs wrong = dev.args;
    wrong.max_seq_len = 1;  // sized from the dummy batch's own length
    CapturedScore g;
    capture(g, wrong, stream);
    Case real = dummy;
    real.seed = 99;
    real.seq_lens = {5000, 20000, 128, 70000};
    const CompareReport r = replay(g, dev, real, dummy.max_seq_len, stream);
    ASSERT_FALSE(r.ok()) << "the harness missed the capture-bound bug, rank " << rank;
    ASSERT_TRUE(r.first);
    EXPECT_EQ(r.first->kind, MismatchKind::outside_bound) << r.summary();  // a written slot still holds the sentinel
    EXPECT_EQ(r.first->at.slot, rank == 0 ? 1 : 0) << r.summary();
    EXPECT_EQ(r.first->got, dummy.sentinel) << r.summary();
  }
}

TEST_F(Capture, OutThatDoesNotFitIsAnErrorAndNothingIsCaptured) {
  HostCase host = materialize(fixed_dummy());
  test::DeviceCase dev(host);
  ScoreArgs a = dev.args;
  a.out->shape[1] = 1;  // 4 tokens needed
  check(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal), "hipStreamBeginCapture");
  std::string message;
  try {
    indexer_context_scores(a, stream);
  } catch (const ContractError& e) {
    EXPECT_EQ(e.clause(), Clause::out_in_capture);
    message = e.what();
  }
  hipGraph_t graph = nullptr;
  check(hipStreamEndCapture(stream, &graph), "hipStreamEndCapture");
  std::size_t nodes = 99;
  check(hipGraphGetNodes(graph, nullptr, &nodes), "hipGraphGetNodes");
  (void)hipGraphDestroy(graph);
  EXPECT_EQ(nodes, 0u) << "something was recorded into the capture";
  EXPECT_NE(message.find("[4, 1, 128]"), std::string::npos) << message;
  EXPECT_NE(message.find(">=tokens=4"), std::string::npos) << message;
  EXPECT_NE(message.find(">=local=128"), std::string::npos) << message;
}

}  // namespace
}  // namespace ctxscore
