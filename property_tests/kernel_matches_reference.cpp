// A kernel backend (the project's kernel by default; see gpu_backend.hpp)
// equals the reference within the contract's bound, over random layouts,
// lengths, tables, ranks, chunkings and ways of passing `out`, and on every
// named case (label gpu).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <iostream>

#include "ctxscore/bits.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/pipeline.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "gpu_backend.hpp"
#include "check_runner.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

using harness::JudgeOptions;
using harness::OutMode;
using harness::run_and_judge;

class Kernel : public test::OnPropertyBackend {
 protected:
  gen::CaseLimits limits() { return backend().fuzz_limits(); }
  // Judges one case, recording it for the fixture on failure.
  void require(const Case& c, OutMode out) {
    JudgeOptions o;
    o.out = out;
    o.write_failure = false;
    test::require(run_and_judge(backend(), c, o), backend().replay_flags());
  }
  // Judges one case outside a property: ok, or the verdict as the failure message.
  harness::Verdict expect_ok(const Case& c, OutMode out = OutMode::given) {
    JudgeOptions o;
    o.out = out;
    const harness::Verdict v = run_and_judge(backend(), c, o);
    EXPECT_TRUE(v.ok()) << v.str() << "\n" << c.str() << "\nfixture: " << v.fixture.str();
    return v;
  }
};

// Repeatability and batch invariance (CONTRACT.md §5): the harness's checks.
TEST_F(Kernel, SameCallGivesTheSameBitsEachTime) {
  test::expect_check_passes(harness::run_check("repeatability", backend(), test::check_context(100)));
}

TEST_F(Kernel, RequestRowsDoNotDependOnTheBatch) {
  test::expect_check_passes(harness::run_check("batch_invariance", backend(), test::check_context(200)));
}

// The floors keep `out` given (where stray writes and a view's own strides
// show) in most cases, and the kernel's load paths all reached.
TEST_F(Kernel, MatchesReferenceOnRandomLayouts) {
  test::run_property(300, [this] {
    const Case c = *gen::genCase(limits());
    const OutMode out = *gen::genOutMode();
    gen::classify(c, out);
    require(c, out);
  }, {{"out given", 0.40},
      {"out given, larger and strided", 0.12},
      {"query heads outermost", 0.04},
      {"query rows not 16-byte aligned", 0.10},
      {"out-of-range page id read", 0.08},
      {"sm_scale other than 1/sqrt(128)", 0.20}});
}

TEST_F(Kernel, MatchesReferenceUnderForcedChunkings) {
  test::run_property(200, [this] {
    const gen::CaseLimits lim = limits();
    Case c = *gen::genCase(lim);
    c.geometry = *gen::genGeometry(c.local(), lim.max_teams, lim.max_ring_pages);
    RC_CLASSIFY(c.geometry->chunk == 1, "CHUNK = 1");
    RC_CLASSIFY(c.geometry->chunk >= c.local(), "CHUNK >= L");
    RC_CLASSIFY(c.geometry->grid_y * c.geometry->chunk >= c.local() + c.geometry->chunk, "extra programs");
    RC_CLASSIFY(c.geometry->teams == 0, "teams: the launcher's choice");
    RC_CLASSIFY(c.geometry->teams > 1, "teams: several, forced");
    RC_CLASSIFY(c.geometry->ring_pages == 0, "ring pages: the launcher's choice");
    RC_CLASSIFY(c.geometry->ring_pages > 1, "ring pages: several, forced");
    require(c, *gen::genOutMode());
  });
}

TEST_F(Kernel, MatchesReferenceOnTheM3Shapes) {
  test::run_property(100, [this] {
    gen::CaseLimits lim = limits();
    lim.min_heads = lim.max_heads = 4;
    lim.min_world = lim.max_world = 4;
    lim.min_query_len = lim.max_query_len = *rc::gen::element<std::int64_t>(1, 4);
    const Case c = *gen::genCase(lim);
    const OutMode out = *gen::genOutMode();
    gen::classify(c, out);
    require(c, out);
  });
}

// The consumer's pipeline (CONTRACT.md §9): the harness's checks.
TEST_F(Kernel, ShardColumnsAreBitwiseTheWorldOneColumns) {
  test::expect_check_passes(harness::run_check("shard_columns", backend(), test::check_context(100)));
}

// CONTRACT.md §7: a call that breaks one clause is refused before anything is written.
TEST_F(Kernel, RefusesEachBrokenClauseAndWritesNothing) {
  test::expect_check_passes(harness::run_check("refusals", backend(), test::check_context(20)));
}

TEST_F(Kernel, MergedSelectionIsTheReferenceSelection) {
  test::expect_check_passes(harness::run_check("selection", backend(), test::check_context(100)));
}

// Every upstream and corpus case, at every rank of its world, with `out`
// given, absent and too small.
TEST_F(Kernel, EveryCorpusCaseAtEveryRankAndOutMode) {
  std::int64_t judged = 0;
  for (Case c : harness::corpus_cases())
    for (std::int64_t r = 0; r < c.world; ++r) {
      c.rank = r;
      for (OutMode out : {OutMode::given, OutMode::absent, OutMode::too_small}) {
        SCOPED_TRACE(c.name + " rank " + std::to_string(r) + " out " + harness::out_mode_name(out));
        expect_ok(c, out);
        ++judged;
      }
    }
  std::cout << "judged " << judged << " corpus calls" << std::endl;
}

// The peer projects' cases at every rank of worlds 1, 2, 4 and 8, and each
// rank's written columns bitwise the world-1 columns of their blocks.
TEST_F(Kernel, PeerCasesAtEveryRankOfWorlds1248) {
  std::int64_t judged = 0;
  for (const harness::NamedCase& n : harness::named_cases()) {
    if (n.family != harness::CaseFamily::peer) continue;
    for (const Case& c : harness::at_every_rank_of_worlds_1_2_4_8(n.spec)) {
      SCOPED_TRACE(c.name + " world " + std::to_string(c.world) + " rank " + std::to_string(c.rank));
      expect_ok(c);
      ++judged;
      if (c.rank > 0) continue;
      const harness::PipelineVerdict v =
          harness::judge_pipeline(backend(), c, std::vector<OutMode>(static_cast<std::size_t>(c.world), OutMode::given));
      EXPECT_TRUE(v.ok()) << v.str();
    }
  }
  std::cout << "judged " << judged << " peer-case shards" << std::endl;
}

TEST_F(Kernel, UpstreamBoundIndependenceIsBitwise) {
  std::vector<std::vector<float>> outs;
  for (const char* name : {"upstream_bound_independence_S4000", "upstream_bound_independence_S8192",
                           "upstream_bound_independence_S65536"}) {
    const Case& c = harness::named_case(name).spec;
    expect_ok(c);
    HostCase host = materialize(c);
    outs.push_back(backend().score(host, OutMode::given).out);
  }
  for (std::size_t k = 1; k < outs.size(); ++k) {
    ASSERT_EQ(outs[k].size(), outs[0].size());
    for (std::size_t e = 0; e < outs[0].size(); ++e)
      ASSERT_EQ(float_bits(outs[k][e]), float_bits(outs[0][e])) << "element " << e << ", bound " << k;
  }
}

TEST_F(Kernel, UpstreamUnpopulatedTableWritesEverySlot) {
  Case c = harness::named_case("upstream_unpopulated_table").spec;
  for (std::int64_t r = 0; r < c.world; ++r) {
    c.rank = r;
    EXPECT_EQ(expect_ok(c).report.written, 8 * 4 * 4) << "rank " << r;
  }
}

TEST_F(Kernel, ZeroTokensWriteNothing) {
  const Case c = harness::CaseBuilder("zero_tokens").lens({}).build();
  for (OutMode out : {OutMode::given, OutMode::absent, OutMode::too_small}) expect_ok(c, out);
}

// Offsets past 2^31 (the harness's large_offsets check, one case each):
// they need the memory three copies of their buffers take on the host, and
// skip, saying so, on a smaller one.
TEST(LargeOffsets, CachePastTwoToThe31Elements) {
  if (const std::string why = test::property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
  test::expect_check_passes(harness::run_check("large_offsets", test::property_backend(), test::named_cases({"cache_past_2_31_elements"})));
}

TEST(LargeOffsets, OutHeadStridePastTwoToThe31Elements) {
  if (const std::string why = test::property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
  test::expect_check_passes(harness::run_check("large_offsets", test::property_backend(), test::named_cases({"out_head_stride_past_2_31"})));
}

TEST(LargeOffsets, OutRowStridePastTwoToThe31Elements) {
  if (const std::string why = test::property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
  test::expect_check_passes(harness::run_check("large_offsets", test::property_backend(), test::named_cases({"out_row_stride_past_2_31"})));
}

TEST(LargeOffsets, QueryRowPastTwoToThe31Bytes) {
  if (const std::string why = test::property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
  test::expect_check_passes(harness::run_check("large_offsets", test::property_backend(), test::named_cases({"query_row_past_2_31_bytes"})));
}

// Request ids past 2^15 and 2^16 (the harness's large_batches check).
TEST(LargeBatches, RequestIdsPastSixteenBitsReadTheirOwnRequest) {
  if (const std::string why = test::property_backend_absence(); !why.empty()) CTXSCORE_SKIP_OR_FAIL(why);
  test::expect_check_passes(harness::run_check("large_batches", test::property_backend(), {}));
}

// The benchmark's M3 shapes at full size (label slow).
TEST_F(Kernel, EveryBenchmarkShapeAtFullSize) {
  for (const harness::NamedCase& n : harness::named_cases())
    if (n.family == harness::CaseFamily::benchmark) {
      const harness::Verdict v = expect_ok(n.spec);
      std::cout << n.spec.name << ": " << v.str() << std::endl;
    }
}

}  // namespace
}  // namespace ctxscore
