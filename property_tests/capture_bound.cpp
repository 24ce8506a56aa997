// The capture-bound rule: a graph captured on a one-token dummy batch at the
// stable bound (or on a batch of zero lengths) replays correctly for every
// later batch written into the same buffers (the harness's capture check);
// sized from the dummy's own length, it does not, and the harness's replay
// judge says so. Runs for every backend that can record a graph (label gpu).
#include <gtest/gtest.h>

#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/checks.hpp"
#include "gpu_backend.hpp"
#include "check_runner.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using harness::CaseBuilder;

class Capture : public test::OnPropertyBackend {};

// The harness's capture check: a dummy batch at the stable bound replays
// every later batch right, and bitwise as a plain call of the same batch.
TEST_F(Capture, DummyBatchAtTheStableBoundReplaysEveryBatch) {
  test::expect_check_passes(harness::run_check("capture", backend(), test::check_context(40)));
}

TEST_F(Capture, BoundSizedFromTheDummyIsCaught) {
  // Negative control: the capture-bound bug must be reported as a mismatch.
  // With S = 1 rank 0 scores only slot 0 of each request, every other rank nothing.
  for (std::int64_t rank : {0, 1}) {
    const Case dummy = CaseBuilder("capture_dummy_fixed").heads(4).world(4).rank(rank).bound(65536).pages(32)
                           .lens(std::vector<std::int32_t>(4, 1)).table(harness::every_entry(3)).build();
    HostCase host = materialize(dummy);
    const auto g = backend().capture(host, 1);  // sized from the dummy batch's own length
    if (!g) CTXSCORE_SKIP_OR_FAIL(backend().name() + " cannot record a graph");
    Case real = dummy;
    real.seed = 99;
    real.seq_lens = {5000, 20000, 128, 70000};
    const harness::Verdict v = harness::judge_replay(*g, real, dummy.max_seq_len);
    ASSERT_FALSE(v.ok()) << "the harness missed the capture-bound bug, rank " << rank;
    ASSERT_EQ(v.error, "") << v.str();
    const CompareReport& r = v.report;
    ASSERT_TRUE(r.first);
    EXPECT_EQ(r.first->kind, MismatchKind::outside_bound) << r.summary();  // a written slot still holds the sentinel
    EXPECT_EQ(r.first->at.slot, rank == 0 ? 1 : 0) << r.summary();
    EXPECT_EQ(r.first->got, dummy.sentinel) << r.summary();
  }
}

}  // namespace
}  // namespace ctxscore
