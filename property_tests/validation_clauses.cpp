// One test per validation clause of the contract: each bad argument raises
// its own ContractError naming the argument, the value and the expectation,
// and the out buffer stays untouched.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <tuple>

#include "ctxscore/case.hpp"
#include "ctxscore/harness/backend.hpp"
#include "ctxscore/harness/generators.hpp"
#include "ctxscore/harness/refusals.hpp"
#include "property_runner.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/score.hpp"

namespace ctxscore {
namespace {

class Validation : public ::testing::Test {
 protected:
  void SetUp() override {
    host = materialize(harness::CaseBuilder("validation")
                           .heads(2).query_len(2).world(2).rank(1)
                           .bound(512)  // G = 4, L = 2
                           .pages(3)
                           .lens({300, 5})
                           .table({0, 1, 2, 0, 1, 2, 0, 1})
                           .build());
    args = host.args();
  }

  // Applies one change, expects that clause with every given fragment in the
  // message, and checks that out kept its sentinel.
  void expect_clause(const std::function<void(ScoreArgs&)>& change, Clause clause,
                     std::initializer_list<const char*> fragments) {
    ScoreArgs a = args;
    change(a);
    try {
      score_shard(a);
      FAIL() << "no error for clause " << clause_name(clause);
    } catch (const ContractError& e) {
      EXPECT_EQ(e.clause(), clause) << e.what();
      for (const char* f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
          << "message '" << e.what() << "' lacks '" << f << "'";
    }
    for (float v : host.out) ASSERT_EQ(v, host.spec.sentinel) << "out written despite the error";
  }

  HostCase host;
  ScoreArgs args;
};

TEST_F(Validation, ValidBaseCasePasses) { EXPECT_NO_THROW(score_shard(args)); }

TEST_F(Validation, QueryLayout) {
  expect_clause([](ScoreArgs& a) { a.idx_q.shape[2] = 64; }, Clause::query_layout, {"idx_q", "[4, 2, 64]", "[tokens, heads, 128]"});
  expect_clause([](ScoreArgs& a) { a.idx_q.ndim = 2; }, Clause::query_layout, {"idx_q"});
}
TEST_F(Validation, QueryDtype) {
  expect_clause([](ScoreArgs& a) { a.idx_q.dtype = DType::f16; }, Clause::query_dtype, {"idx_q", "f16", "bf16"});
}
TEST_F(Validation, QueryDimStride) {
  expect_clause([](ScoreArgs& a) { a.idx_q.strides[2] = 2; }, Clause::query_dim_stride, {"idx_q", "D stride 2", "D stride 1"});
}
TEST_F(Validation, CacheLayout) {
  expect_clause([](ScoreArgs& a) { a.index_cache.shape[1] = 64; }, Clause::cache_layout, {"index_cache", "[pages, 128, 128]"});
}
TEST_F(Validation, CacheEmpty) {
  expect_clause([](ScoreArgs& a) { a.index_cache.shape[0] = 0; }, Clause::cache_empty, {"index_cache", "0 pages", "at least 1"});
}
TEST_F(Validation, CacheContiguous) {
  expect_clause([](ScoreArgs& a) { a.index_cache.strides[0] = 20000; }, Clause::cache_contiguous, {"index_cache", "20000", "contiguous"});
}
TEST_F(Validation, CacheDtypeRejectsFp8) {
  expect_clause([](ScoreArgs& a) { a.index_cache.dtype = DType::f8e4m3; }, Clause::cache_dtype, {"index_cache", "f8e4m3", "bf16", "per-token scale"});
}
TEST_F(Validation, TableLayout) {
  expect_clause([](ScoreArgs& a) { a.block_table.ndim = 1; }, Clause::table_layout, {"block_table", "2 dims"});
}
TEST_F(Validation, TableDtype) {
  expect_clause([](ScoreArgs& a) { a.block_table.dtype = DType::i64; }, Clause::table_dtype, {"block_table", "i64", "i32"});
}
TEST_F(Validation, TableColumnStride) {
  expect_clause([](ScoreArgs& a) { a.block_table.strides[1] = 2; }, Clause::table_column_stride, {"block_table", "column stride 2", "column stride 1"});
}
TEST_F(Validation, LengthsLayout) {
  expect_clause([](ScoreArgs& a) { a.seq_lens.ndim = 2; }, Clause::lengths_layout, {"seq_lens", "1 dim"});
}
TEST_F(Validation, LengthsDtype) {
  expect_clause([](ScoreArgs& a) { a.seq_lens.dtype = DType::i64; }, Clause::lengths_dtype, {"seq_lens", "i64", "i32"});
}
TEST_F(Validation, LengthsContiguous) {
  expect_clause([](ScoreArgs& a) { a.seq_lens.strides[0] = 2; }, Clause::lengths_contiguous, {"seq_lens", "(2)", "(1)"});
}
TEST_F(Validation, SameDevice) {
  expect_clause([](ScoreArgs& a) { a.block_table.device = {Device::Kind::gpu, 1}; }, Clause::same_device, {"block_table", "gpu:1", "host:0"});
  expect_clause([](ScoreArgs& a) { a.index_cache.device = {Device::Kind::host, 2}; }, Clause::same_device, {"index_cache", "host:2"});
  expect_clause([](ScoreArgs& a) { a.seq_lens.device = {Device::Kind::gpu, 0}; }, Clause::same_device, {"seq_lens", "gpu:0"});
}
TEST_F(Validation, World) {
  expect_clause([](ScoreArgs& a) { a.world = 0; }, Clause::world, {"world", "got 0", ">= 1"});
}
TEST_F(Validation, Rank) {
  expect_clause([](ScoreArgs& a) { a.rank = 2; }, Clause::rank, {"rank", "got 2", "< world = 2"});
  expect_clause([](ScoreArgs& a) { a.rank = -1; }, Clause::rank, {"rank", "got -1"});
}
TEST_F(Validation, MaxSeqLen) {
  expect_clause([](ScoreArgs& a) { a.max_seq_len = 0; }, Clause::max_seq_len, {"max_seq_len", "got 0", ">= 1"});
}
TEST_F(Validation, MaxQueryLen) {
  expect_clause([](ScoreArgs& a) { a.max_query_len = 0; }, Clause::max_query_len, {"max_query_len", "got 0", ">= 1"});
}
TEST_F(Validation, Heads) {
  expect_clause([](ScoreArgs& a) { a.idx_q.shape[1] = 0; }, Clause::heads, {"idx_q", "heads = 0", "heads >= 1"});
}
TEST_F(Validation, TokensVsBatch) {
  expect_clause([](ScoreArgs& a) { a.max_query_len = 3; }, Clause::tokens_vs_batch, {"idx_q", "tokens = 4", "2 * 3 = 6"});
}
TEST_F(Validation, TableRows) {
  expect_clause([](ScoreArgs& a) { a.block_table.shape[0] = 1; }, Clause::table_rows, {"block_table", "rows = 1", "batch = 2"});
}
TEST_F(Validation, TableWidth) {
  expect_clause([](ScoreArgs& a) { a.max_seq_len = 513; }, Clause::table_width, {"block_table", "width = 4", "= 5"});
}
TEST_F(Validation, OutShapeForTheReference) {
  expect_clause([](ScoreArgs& a) { a.out->shape[2] = 1; }, Clause::out_shape, {"out", "[2, 4, 1]", ">=local=2"});
  expect_clause([](ScoreArgs& a) { a.out->dtype = DType::f16; }, Clause::out_shape, {"out", "f16", "need f32"});
  expect_clause([](ScoreArgs& a) { a.out->shape[0] = 3; }, Clause::out_shape, {"out", "heads=2"});
}
TEST_F(Validation, OutInCaptureIsAnErrorNamingBothShapes) {
  ScoreArgs a = args;
  a.out->shape[1] = 3;
  const Layout l = validate(a);
  try {
    decide_out(a, l, /*capturing=*/true);
    FAIL() << "no error";
  } catch (const ContractError& e) {
    EXPECT_EQ(e.clause(), Clause::out_in_capture);
    EXPECT_NE(std::string(e.what()).find("[2, 3, 2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(">=tokens=4"), std::string::npos) << e.what();
  }
  const OutDecision outside = decide_out(a, l, /*capturing=*/false);
  EXPECT_FALSE(outside.use_given);
  EXPECT_NE(outside.fresh_reason.find("fresh buffer"), std::string::npos);
  a.out.reset();
  EXPECT_EQ(decide_out(a, l, true).fresh_reason, "no out given");
  EXPECT_TRUE(decide_out(args, l, true).use_given);
}
TEST_F(Validation, GeometryOverride) {
  const Layout l = validate(args);
  EXPECT_THROW(apply_override(l.geometry, {0, 4}), ContractError);
  EXPECT_THROW(apply_override(l.geometry, {1, 1}), ContractError);  // 1 program of 1 slot < L = 2
  EXPECT_EQ(apply_override(l.geometry, {1, 5}).grid_y, 5);
}

// The refusals check breaks each clause of the validator once, or says why
// it cannot: no clause is forgotten, none broken twice.
TEST(Refusals, EveryClauseIsBrokenOnceOrSaysWhyNot) {
  std::map<Clause, int> seen;
  for (const harness::Breach& b : harness::breaches()) ++seen[b.clause];
  for (const auto& [c, why] : harness::clauses_not_breached()) {
    ++seen[c];
    EXPECT_FALSE(why.empty()) << clause_name(c);
  }
  for (int k = 0; k <= static_cast<int>(Clause::geometry_override); ++k)
    EXPECT_EQ(seen[static_cast<Clause>(k)], 1) << clause_name(static_cast<Clause>(k));
}

// Every breach of a drawn case is refused by the reference for its own
// clause, with every storage unchanged, and the unbroken call is scored.
TEST(Refusals, TheReferenceRefusesEachBrokenClauseAndWritesNothing) {
  const auto reference = harness::make_backend("reference");
  test::run_property(100, [&] {
    const Case c = *gen::genCase(gen::CaseLimits{});
    gen::count_class("a table width below the bound can be broken (G >= 2)", c.global() >= 2);
    HostCase host = materialize(c);
    if (const auto failed = harness::judge_refusals(*reference, host)) {
      test::note_failure(c, failed->str());
      RC_FAIL(failed->str());
    }
  }, {{"a table width below the bound can be broken (G >= 2)", 0.5}});
}

// A backend around the reference that gets refusals wrong in one way.
class MisRefusing : public harness::Backend {
 public:
  enum class Bug { writes_first, accepts_all, refuses_all, refuses_for_another_clause };
  explicit MisRefusing(Bug bug) : bug_(bug) {}
  std::string name() const override { return "misrefusing"; }
  harness::Oracle oracle() const override { return harness::Oracle::reference; }
  gen::CaseLimits fuzz_limits() const override { return {}; }
  harness::Scored score(HostCase& host, harness::OutMode mode) override { return reference_->score(host, mode); }
  std::string toolchain() const override { return "none"; }
  harness::CallOutcome call(harness::RawCall& c) override {
    if (bug_ == Bug::writes_first) std::fill(c.out.bytes.begin(), c.out.bytes.end(), std::uint8_t{0});
    if (bug_ == Bug::accepts_all) return {};
    if (bug_ == Bug::refuses_all) return {true, "no", std::nullopt, false};
    harness::CallOutcome o = reference_->call(c);
    if (bug_ == Bug::refuses_for_another_clause && o.clause) o.clause = Clause::geometry_override;
    return o;
  }

 private:
  Bug bug_;
  std::unique_ptr<harness::Backend> reference_ = harness::make_backend("reference");
};

// The judge of refusals fails each way of getting them wrong, naming it.
TEST(Refusals, TheJudgeFailsEachWayOfGettingARefusalWrong) {
  HostCase host = materialize(harness::CaseBuilder("refusals").heads(2).query_len(2).world(2).rank(1).bound(512)
                                  .pages(3).lens({300, 5}).table({0, 1, 2, 0, 1, 2, 0, 1}).build());
  using Outcome = harness::RefusalFailure::Outcome;
  const std::tuple<MisRefusing::Bug, const char*, Outcome> bugs[] = {
      {MisRefusing::Bug::writes_first, "wrote before refusing: out changed", Outcome::wrote_before_refusing},
      {MisRefusing::Bug::accepts_all, "clause query_layout (idx_q [T, H, 64]: a head dimension other than 128): accepted the call",
       Outcome::accepted},
      {MisRefusing::Bug::refuses_all, "refused a valid call", Outcome::refused_valid},
      {MisRefusing::Bug::refuses_for_another_clause, "refused for another clause, geometry_override", Outcome::other_clause},
  };
  for (const auto& [bug, says, outcome] : bugs) {
    MisRefusing b(bug);
    const auto failed = harness::judge_refusals(b, host);
    ASSERT_TRUE(failed.has_value()) << says;
    EXPECT_NE(failed->str().find(says), std::string::npos) << "expected \"" << says << "\" in: " << failed->str();
    EXPECT_EQ(failed->fields().at("outcome"), harness::outcome_name(outcome)) << failed->str();
  }
}

}  // namespace
}  // namespace ctxscore
