// The comparison catches every kind of wrong output, and refuses to judge
// inputs outside the numeric model.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cfloat>
#include <cmath>
#include <limits>

#include "ctxscore/compare.hpp"
#include "ctxscore/harness/case_builder.hpp"
#include "ctxscore/harness/generators.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "scored_case.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

struct Judged {
  test::ScoredCase s;
  std::vector<float> before;
};

Judged judged_case() {
  const Case c = harness::CaseBuilder("compare")
                     .seed(5).heads(2).query_len(2).world(2).rank(0)
                     .bound(1024)  // G = 8, L = 4
                     .pages(4)
                     .lens({300, 257})  // request 1, token 0 reaches no position of block 2
                     .table({0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0, 3, 2, 1, 0})
                     .out(5, 6, 30, 6, 1)  // larger than [2, 4, 4]
                     .build();
  Judged j;
  j.before = materialize(c).out;
  j.s = test::score_case(c);
  return j;
}

CompareReport judge(const Judged& j, const std::vector<float>& after) {
  return compare(j.s.ref, j.s.host.out_layout(), j.before.data(), after.data(),
                 static_cast<std::int64_t>(after.size()));
}

TEST(Compare, AcceptsTheReferenceItself) {
  const Judged j = judged_case();
  const CompareReport r = judge(j, j.s.host.out);
  EXPECT_TRUE(r.ok()) << r.summary();
  EXPECT_GT(r.written_finite, 0);
  EXPECT_GT(r.written_neg_inf, 0);
  EXPECT_GT(r.unwritten_checked, 0);
  EXPECT_LE(r.worst_ratio, 0.5);  // fp32 rounding of the exact score: half an ulp, the bound holds at least one
}

TEST(Compare, FlagsAValueJustOutsideTheBound) {
  const Judged j = judged_case();
  std::vector<float> after = j.s.host.out;
  const ScoresView o = j.s.host.out_layout();
  const std::size_t e = static_cast<std::size_t>(j.s.ref.index(1, 0, 0));
  const double exact = j.s.ref.exact[e], bound = j.s.ref.bound[e];
  float& v = after[static_cast<std::size_t>(o.offset(1, 0, 0))];
  v = static_cast<float>(exact + 0.9 * bound);
  EXPECT_TRUE(judge(j, after).ok()) << "0.9 of the bound must pass";
  v = static_cast<float>(exact + 1.5 * bound);
  const CompareReport r = judge(j, after);
  ASSERT_FALSE(r.ok());
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->kind, MismatchKind::outside_bound);
  EXPECT_EQ(r.first->at.head, 1);
  EXPECT_EQ(r.first->at.request, 0);
  EXPECT_EQ(r.first->at.slot, 0);
  EXPECT_EQ(r.first->at.page, 0);
  EXPECT_NE(r.summary().find("outside_bound"), std::string::npos);
}

// The edge of the bound on every written element of several cases at once:
// 0.99 of the bound either way passes everywhere, 1.01 fails everywhere.
TEST(Compare, TheBoundsEdgeHoldsOnEveryElement) {
  std::int64_t probed = 0;
  for (const char* name : {"world_1", "strided_layouts", "speculative_decode_ql4", "sm_scale_negative"}) {
    const Case& c = harness::named_case(name).spec;
    const Judged j{test::score_case(c), materialize(c).out};
    const ScoresView o = j.s.host.out_layout();
    for (const double factor : {0.99, 1.01})
      for (const double sign : {1.0, -1.0}) {
        std::vector<float> after = j.s.host.out;
        std::int64_t moved = 0;
        for (std::int64_t h = 0; h < c.heads; ++h)
          for (std::int64_t row = 0; row < c.tokens(); ++row)
            for (std::int64_t slot = 0; slot < c.local(); ++slot) {
              if (!j.s.ref.is_written(row, slot)) continue;
              const std::size_t e = static_cast<std::size_t>(j.s.ref.index(h, row, slot));
              if (!std::isfinite(j.s.ref.exact[e])) continue;
              after[static_cast<std::size_t>(o.offset(h, row, slot))] =
                  static_cast<float>(j.s.ref.exact[e] + sign * factor * j.s.ref.bound[e]);
              ++moved;
            }
        ASSERT_GE(moved, 8) << name;
        probed += moved;
        const CompareReport r = judge(j, after);
        if (factor < 1) EXPECT_TRUE(r.ok()) << name << " at " << sign * factor << " of the bound: " << r.summary();
        else EXPECT_EQ(r.mismatches, moved) << name << " at " << sign * factor << " of the bound: " << r.summary();
      }
  }
  EXPECT_GT(probed, 400);
}

TEST(Compare, FlagsEachKindOfWrongElement) {
  const Judged j = judged_case();
  const ScoresView o = j.s.host.out_layout();
  // Find one −inf slot and one finite slot.
  std::int64_t inf_row = -1, inf_slot = -1;
  for (std::int64_t row = 0; row < 4 && inf_row < 0; ++row)
    for (std::int64_t s = 0; s < 4; ++s)
      if (j.s.ref.is_written(row, s) && std::isinf(j.s.ref.exact[static_cast<std::size_t>(j.s.ref.index(0, row, s))])) {
        inf_row = row;
        inf_slot = s;
        break;
      }
  ASSERT_GE(inf_row, 0) << "the case must hold a −inf slot";
  const auto kind_after = [&](std::int64_t off, float v) {
    std::vector<float> after = j.s.host.out;
    after[static_cast<std::size_t>(off)] = v;
    const CompareReport r = judge(j, after);
    EXPECT_FALSE(r.ok());
    return r.first ? r.first->kind : MismatchKind::outside_bound;
  };
  // Where −inf is due, nothing but −inf: not a max that started at −FLT_MAX, nor a
  // "very negative" value, nor NaN, nor +inf.
  EXPECT_EQ(kind_after(o.offset(0, inf_row, inf_slot), -FLT_MAX), MismatchKind::expected_neg_inf);
  EXPECT_EQ(kind_after(o.offset(0, inf_row, inf_slot), -1e30f), MismatchKind::expected_neg_inf);
  EXPECT_EQ(kind_after(o.offset(0, inf_row, inf_slot), NAN), MismatchKind::expected_neg_inf);
  EXPECT_EQ(kind_after(o.offset(0, inf_row, inf_slot), INFINITY), MismatchKind::expected_neg_inf);
  EXPECT_EQ(kind_after(o.offset(0, inf_row, inf_slot), 0.0f), MismatchKind::expected_neg_inf);
  EXPECT_EQ(kind_after(o.offset(0, 0, 0), -INFINITY), MismatchKind::lost_finite);
  EXPECT_EQ(kind_after(o.offset(0, 0, 0), NAN), MismatchKind::lost_finite);
  EXPECT_EQ(kind_after(o.offset(0, 0, 3), 1.0f), MismatchKind::unwritten_changed);   // past scan
  EXPECT_EQ(kind_after(o.offset(1, 4, 5), 1.0f), MismatchKind::outside_view_changed);  // past [:T, :L]
  // A NaN written over a NaN-free sentinel, and a sentinel rewritten with other bits.
  EXPECT_EQ(kind_after(o.offset(0, 3, 3), -0.0f), MismatchKind::unwritten_changed);
}

TEST(Compare, RefusesInputsOutsideTheNumericModel) {
  const auto outcome = [](auto poison) {
    Case c;
    c.seq_lens = {200};
    c.max_seq_len = 256;
    c.pages = 2;
    c.table_width = 2;
    c.table_row_stride = 2;
    c.block_table = {1, 0};
    HostCase h = materialize(c);
    poison(h);
    const std::vector<float> before = h.out;
    const ShardScores s = score_shard(h.args());
    const CompareReport r = compare(s, h.out_layout(), before.data(), h.out.data(), static_cast<std::int64_t>(h.out.size()));
    EXPECT_FALSE(r.ok());
    EXPECT_NE(r.summary().find("OUT OF CONTRACT"), std::string::npos);
    return r.out_of_contract.value_or("");
  };
  EXPECT_NE(outcome([](HostCase& h) { h.q[3] = bf16(NAN); }).find("idx_q"), std::string::npos);
  EXPECT_NE(outcome([](HostCase& h) { h.cache[16384 + 7] = bf16(INFINITY); }).find("non-finite"), std::string::npos);
  EXPECT_NE(outcome([](HostCase& h) {
              for (int d = 0; d < 128; ++d) h.q[static_cast<std::size_t>(d)] = bf16(1e30f);
              h.cache[5] = bf16(1e30f);
            }).find("overflow"),
            std::string::npos);
  EXPECT_NE(outcome([](HostCase& h) {
              h.q[0] = bf16(1e-30f);
              h.cache[0] = bf16(1e-30f);
            }).find("below"),
            std::string::npos);
  // A poisoned page that no slot dereferences is not a problem.
  Case c;
  c.seq_lens = {100};
  c.pages = 2;
  c.block_table = {0};
  HostCase h = materialize(c);
  h.cache[16384] = bf16(NAN);
  EXPECT_FALSE(score_shard(h.args()).out_of_contract);
}

TEST(Compare, AnySingleCorruptedWrittenScoreIsCaught) {
  test::run_property(100, [] {
    const Case c = *gen::genCase({});
    const auto s = test::score_case(c);
    std::vector<std::pair<std::int64_t, std::int64_t>> written;  // (out offset, reference index)
    const ScoresView o = s.host.out_layout();
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row = 0; row < c.tokens(); ++row)
        for (std::int64_t j = 0; j < c.local(); ++j)
          if (s.ref.is_written(row, j)) written.emplace_back(o.offset(h, row, j), s.ref.index(h, row, j));
    RC_PRE(!written.empty());
    const std::vector<float> before = materialize(c).out;
    std::vector<float> after = s.host.out;
    const auto [offset, index] = written[*rc::gen::inRange<std::size_t>(0, written.size())];
    float& v = after[static_cast<std::size_t>(offset)];
    // Past the element's bound by at least its own size: no rounding hides it.
    const double exact = s.ref.exact[static_cast<std::size_t>(index)], bound = s.ref.bound[static_cast<std::size_t>(index)];
    v = std::isinf(exact) ? 0.0f : static_cast<float>(exact + 2 * bound + std::fmax(1e-3, std::fabs(exact) * 1e-3));
    const CompareReport r = compare(s.ref, o, before.data(), after.data(), static_cast<std::int64_t>(after.size()));
    RC_ASSERT(!r.ok());
    RC_ASSERT(r.mismatches == 1);
  });
}

}  // namespace
}  // namespace ctxscore
