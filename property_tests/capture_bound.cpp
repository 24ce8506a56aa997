// The capture-bound rule: a graph captured on a one-token dummy batch at the
// stable bound (or on a batch of zero lengths) replays correctly for every
// later batch written into the same buffers; sized from the dummy's own
// length, it does not, and the harness says so. Runs for every backend that can record a graph (label gpu).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "ctxscore/bits.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/score.hpp"
#include "gpu_backend.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using harness::CaseBuilder;

class Capture : public test::OnPropertyBackend {
 protected:
  // A failing case's replay line scores it through a graph, as here.
  std::string replay_flags() { return backend().replay_flags() + " --capture"; }

  // Whether the backend records graphs at all (a one-token probe). A probe
  // that raises fails the test, with the probe as its case.
  bool records_graphs() {
    const Case probe = CaseBuilder("capture_probe").lens({1}).build();
    HostCase host = materialize(probe);
    try {
      return backend().capture(host, 128) != nullptr;
    } catch (const std::exception& e) {
      test::fail_with_case(probe, std::string("capture raised: ") + e.what(), replay_flags());
      return false;
    }
  }
};

// Skips (fails, where a GPU is required) a test whose backend records no
// graph; a probe that raised has failed the test already.
#define REQUIRE_GRAPHS()                                                 \
  do {                                                                   \
    if (records_graphs()) break;                                         \
    if (HasFailure()) return;                                            \
    CTXSCORE_SKIP_OR_FAIL(backend().name() + " cannot record a graph"); \
  } while (0)

// A real batch with the dummy's shapes (B, H, QL, world, rank, S, P, table width).
Case real_batch(const Case& shape) {
  Case c = shape;
  c.name = "capture_replay";
  c.seed = *rc::gen::arbitrary<std::uint32_t>();
  for (std::int32_t& len : c.seq_lens) len = *gen::genSeqLen(c.max_seq_len, c.query_len);
  c.block_table = *gen::genPageTable(c.batch(), c.table_width, c.pages);
  gen::poison_past_reach(c);
  return c;
}

// Replays `g` over `real`; the harness's judge holds the replay, as a call
// with out given, to the reference's scores of the real batch at `bound`.
harness::Verdict replay(harness::CapturedScore& g, Case real, std::int64_t bound) {
  harness::Verdict v;
  v.spec = real;
  v.backend = "replay";
  v.oracle = harness::oracle_name(harness::Oracle::reference);
  HostCase host = materialize(real);
  const std::vector<float> before = host.out;
  harness::Scored replayed;
  try {
    replayed = g.replay(host);
  } catch (const std::exception& e) {
    v.error = std::string("replay raised: ") + e.what();
    return v;
  }
  real.max_seq_len = bound;
  HostCase judged = materialize(real);
  harness::judge_scored(v, judged, before, replayed, harness::oracle_scores(harness::Oracle::reference, judged));
  return v;
}

Case dummy_shape() {
  const std::int64_t heads = *rc::gen::element<std::int64_t>(1, 4, 16);
  const std::int64_t world = *rc::gen::element<std::int64_t>(1, 4, 16);
  return CaseBuilder("capture_dummy")
      .heads(heads).query_len(*rc::gen::element<std::int64_t>(1, 4)).world(world)
      .rank(*rc::gen::inRange<std::int64_t>(0, world))
      .bound(*rc::gen::element<std::int64_t>(4096, 32768, 65536)).pages(32)
      // One token each, or none: capturing on all-zero lengths must not read out of bounds either.
      .lens(std::vector<std::int32_t>(static_cast<std::size_t>(*rc::gen::inRange(1, 17)), *rc::gen::element(0, 1)))
      .table(harness::every_entry(0))
      .build();
}

TEST_F(Capture, DummyBatchAtTheStableBoundReplaysEveryBatch) {
  REQUIRE_GRAPHS();
  test::run_property(40, [this] {
    const Case dummy = dummy_shape();
    HostCase host = materialize(dummy);
    const auto g = test::on_case(dummy, replay_flags(), "capture raised",
                                 [&] { return backend().capture(host, dummy.max_seq_len); });
    for (int k = 0; k < 3; ++k) {
      const Case real = real_batch(dummy);
      const harness::Verdict v = replay(*g, real, dummy.max_seq_len);
      if (!v.ok()) {
        test::note_failure(real, v.str(), replay_flags());
        RC_FAIL("replay " + std::to_string(k) + ": " + v.str());
      }
    }
  });
}

// A replay writes, bitwise, what a plain call on the same batch writes.
TEST_F(Capture, ReplayEqualsAPlainCallBitwise) {
  REQUIRE_GRAPHS();
  test::run_property(20, [this] {
    const std::string flags = replay_flags();
    const Case dummy = dummy_shape();
    HostCase host = materialize(dummy);
    const auto g = test::on_case(dummy, flags, "capture raised", [&] { return backend().capture(host, dummy.max_seq_len); });
    const Case real = real_batch(dummy);
    HostCase replayed = materialize(real), plain = materialize(real);
    const std::vector<float> a = test::on_case(real, flags, "replay raised", [&] { return g->replay(replayed).out; });
    const std::vector<float> b =
        test::on_case(real, flags, "plain call raised", [&] { return backend().score(plain, harness::OutMode::given).out; });
    RC_ASSERT(a.size() == b.size());
    for (std::size_t e = 0; e < a.size(); ++e)
      if (float_bits(a[e]) != float_bits(b[e])) {
        test::note_failure(real, "element " + std::to_string(e) + " differs", flags);
        RC_FAIL("replay and plain call differ at element " + std::to_string(e) + ": " + std::to_string(a[e]) + " vs " +
                std::to_string(b[e]));
      }
  });
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
    const harness::Verdict v = replay(*g, real, dummy.max_seq_len);
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
