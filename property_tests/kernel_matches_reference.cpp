// A kernel backend (the project's kernel by default; see gpu_backend.hpp)
// equals the reference within the contract's bound, over random layouts,
// lengths, tables, ranks, chunkings and ways of passing `out`, and on every
// named case (label gpu).
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <fstream>
#include <iostream>

#include "ctxscore/bits.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/invariance.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "ctxscore/harness/pipeline.hpp"
#include "gpu_backend.hpp"
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
    EXPECT_TRUE(v.ok()) << v.str() << "\n" << c.str() << "\nfixture: " << v.fixture;
    return v;
  }
};

// Repeatability (CONTRACT.md §5): the same call three times gives the first
// call's bits each time.
TEST_F(Kernel, SameCallGivesTheSameBitsEachTime) {
  test::run_property(100, [this] {
    const Case c = *gen::genCase(limits());
    const OutMode out = *gen::genOutMode();
    gen::classify(c, out);
    JudgeOptions o;
    o.out = out;
    o.write_failure = false;
    o.repeat = 3;
    test::require(run_and_judge(backend(), c, o), harness::replay_flags(backend(), o));
  });
}

// Batch invariance (CONTRACT.md §5): a request's rows are the same bits when
// the batch gains, loses or reorders requests, or gains ℓ ≤ 0 ones. The
// shrunk case is the first batch; the other is printed with the verdict.
TEST_F(Kernel, RequestRowsDoNotDependOnTheBatch) {
  test::run_property(200, [this] {
    const Case c = *gen::genCase(limits());
    const harness::Rebatching r = *gen::genRebatching(c);
    const OutMode out = *gen::genOutMode();
    gen::classify(c, out);
    test::count_class("the batch " + r.how, true);
    const auto chunk = [](const Case& x) {
      return launch_geometry(x.batch(), x.max_seq_len, x.world, x.heads, x.query_len).chunk;
    };
    test::count_class("the chunk changes with the batch", chunk(c) != chunk(r.batch));
    const harness::Verdict v = harness::judge_rebatched(backend(), c, r, out);
    if (!v.ok()) {
      test::note_failure(c, v.str() + "; the other batch: " + r.str(), backend().replay_flags());
      RC_FAIL(v.str());
    }
  }, {{"the batch gains requests", 0.12},
      {"the batch loses requests", 0.12},
      {"the batch is reordered", 0.12},
      {"the batch gains requests of length <= 0", 0.12}});
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

// The same case at world 1 and at every rank, each rank's `out` passed its
// own way: what the consumer's merge needs.
harness::PipelineVerdict pipeline_of(harness::Backend& b, const gen::CaseLimits& lim, bool selection = false) {
  const Case c = selection ? *gen::genSelectionCase(lim) : *gen::genCase(lim);
  std::vector<OutMode> modes;
  for (std::int64_t r = 0; r < c.world; ++r) modes.push_back(*gen::genOutMode());
  gen::classify(c);
  return harness::judge_pipeline(b, c, modes);
}

// Each rank's written column j equals, bitwise, what the same scorer writes
// for block j·world + r at world 1 (CONTRACT.md §9: the merge is exact).
TEST_F(Kernel, ShardColumnsAreBitwiseTheWorldOneColumns) {
  std::int64_t columns = 0;
  test::run_property(100, [&] {
    gen::CaseLimits lim = limits();
    lim.max_world = 8;
    lim.max_work = 1 << 13;
    const harness::PipelineVerdict v = pipeline_of(backend(), lim);
    columns += v.columns;
    if (!v.error.empty() || !v.shard_mismatch.empty()) {
      test::note_failure(v.spec, v.str(), backend().replay_flags());
      RC_FAIL(v.str());
    }
  });
  std::cout << "shard columns compared bitwise: " << columns << std::endl;
}

// The merged top-16 over every rank of the backend's scores selects the
// reference's blocks, under both tie rules, except at near-ties; prints how
// often near-ties occur at M3's shapes.
TEST_F(Kernel, MergedSelectionIsTheReferenceSelection) {
  std::int64_t rows = 0, near = 0, matched = 0, decided = 0;
  double worst = 1e300;
  test::run_property(100, [&] {
    gen::CaseLimits lim = limits();
    lim.min_heads = lim.max_heads = 4;
    lim.min_world = lim.max_world = 4;
    lim.min_query_len = lim.max_query_len = *rc::gen::element<std::int64_t>(1, 4);
    lim.max_work = 1 << 14;
    lim.max_batch = std::min<std::int64_t>(lim.max_batch, 3);
    lim.max_bound = std::min<std::int64_t>(lim.max_bound, 1 << 14);
    const harness::PipelineVerdict v = pipeline_of(backend(), lim, true);
    rows += v.higher.rows;
    near += v.higher.near_ties;
    decided += v.higher.decided;
    matched += v.higher.matched;
    worst = std::min(worst, v.higher.worst_margin);
    if (!v.error.empty() || !v.higher.ok() || !v.lower.ok()) {
      test::note_failure(v.spec, v.str(), backend().replay_flags());
      RC_FAIL(v.str());
    }
  });
  std::cout << "merged top-16 at M3 shapes: " << rows << " (head, row) pairs, " << matched << " matched the reference, "
            << decided << " decided (" << (rows ? 100.0 * decided / rows : 0) << " %), " << near << " near-ties ("
            << (rows ? 100.0 * near / rows : 0) << " %), worst margin " << worst << " bounds" << std::endl;
  EXPECT_GE(2 * decided, rows) << "coverage floor: fewer than half the rows decided";
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

// Offsets past 2^31: out views whose head or row stride puts written
// elements past 2^31 elements (8 GiB of out), and an idx_q whose token stride
// puts a row past 2^31 bytes. They need the memory three copies of such an
// out take on the host (the harness's, its copy before the call, what comes
// back), so they skip on a smaller host.
class LargeOffsets : public Kernel {
 protected:
  void SetUp() override {
    Kernel::SetUp();
    if (IsSkipped() || HasFailure()) return;
    constexpr std::int64_t kNeeded = std::int64_t{48} << 30;
    if (const std::int64_t free = available_host_bytes(); free < kNeeded)
      GTEST_SKIP() << "needs 48 GiB of available host memory, this host has " << (free >> 30) << " GiB";
  }
  static std::int64_t available_host_bytes() {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    std::int64_t kib = 0;
    std::string unit;
    while (meminfo >> key >> kib >> unit)
      if (key == "MemAvailable:") return kib << 10;
    return 0;
  }
  // Judges `c` with out given and expects at least one written element past 2^31.
  void expect_ok_past(const Case& c, std::int64_t past) {
    const harness::Verdict v = expect_ok(c);
    EXPECT_GT(v.report.written_finite, 0);
    EXPECT_GE(past, std::int64_t{1} << 31) << "the case does not reach past 2^31";
  }
};

constexpr std::int64_t kPast31 = (std::int64_t{1} << 31) + 17;

TEST_F(LargeOffsets, OutHeadStridePastTwoToThe31Elements) {
  const Case c = harness::CaseBuilder("out_head_stride_past_2_31").seed(31).heads(2).query_len(2).world(2).rank(1)
                     .bound(2048).pages(9).lens({2048, 700}).out(4, 8, kPast31, 8, 1).build();
  expect_ok_past(c, c.out_head_stride);
}

TEST_F(LargeOffsets, OutRowStridePastTwoToThe31Elements) {
  const Case c = harness::CaseBuilder("out_row_stride_past_2_31").seed(32).heads(1).query_len(1).world(1).rank(0)
                     .bound(1024).pages(9).lens({1024, 300}).out(2, 8, 2 * kPast31, kPast31, 1).build();
  expect_ok_past(c, c.out_row_stride);
}

TEST_F(LargeOffsets, QueryRowPastTwoToThe31Bytes) {
  const std::int64_t token_stride = (std::int64_t{1} << 30) + 64;  // bf16: row 1 starts past 2^31 bytes
  const Case c = harness::CaseBuilder("query_row_past_2_31_bytes").seed(33).heads(2).query_len(1).world(2).rank(0)
                     .bound(2048).pages(9).lens({2000, 1500}).query_strides(token_stride, 128).build();
  expect_ok_past(c, 2 * token_stride);
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
