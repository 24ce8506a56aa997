// Tiny cases whose scores are worked out by hand here (one-hot queries and
// keys, known dot products), never by calling the reference's arithmetic.
#include <gtest/gtest.h>

#include <cmath>

#include "ctxscore/case.hpp"
#include "ctxscore/score.hpp"

namespace ctxscore {
namespace {

// A case with all-zero contents, ready for hand-placed values.
HostCase zeroed(Case c) {
  HostCase h = materialize(c.resolved());
  std::fill(h.q.begin(), h.q.end(), bf16(0.0f));
  std::fill(h.cache.begin(), h.cache.end(), bf16(0.0f));
  return h;
}
void set_q(HostCase& h, std::int64_t row, std::int64_t head, std::int64_t d, float v) {
  h.q[static_cast<std::size_t>(row * h.spec.q_token_stride + head * h.spec.q_head_stride + d)] = bf16(v);
}
void set_k(HostCase& h, std::int64_t page, std::int64_t pos, std::int64_t d, float v) {
  h.cache[static_cast<std::size_t>(page * 16384 + pos * 128 + d)] = bf16(v);
}
float out_at(const HostCase& h, std::int64_t head, std::int64_t row, std::int64_t slot) {
  return h.out[static_cast<std::size_t>(h.out_layout().offset(head, row, slot))];
}

// One request of 5 tokens at sm_scale 1: the query is 2 at d = 3, key
// position pos holds pos there, so the dot at pos is 2·pos.
HostCase one_hot_prefix() {
  Case c;
  c.sm_scale = 1.0;
  c.seq_lens = {5};
  c.block_table = {0};
  HostCase h = zeroed(c);
  set_q(h, 0, 0, 3, 2.0f);
  for (int pos = 0; pos < 128; ++pos) set_k(h, 0, pos, 3, static_cast<float>(pos));
  return h;
}

TEST(GoldenCases, OneHotMaxOverTheCausalPrefix) {
  HostCase h = one_hot_prefix();
  score_shard(h.args());
  // positions 0..4 qualify; the largest dot is 2·4 = 8; SCALE = fp32(1.4426950409).
  EXPECT_EQ(out_at(h, 0, 0, 0), 8.0f * 1.4426950409f);
}

// CONTRACT.md §5 at a point worked out by hand: the largest Σ|k·q| over the
// qualifying positions is 2·4 = 8, SCALE·8 lies in [8, 16) where an fp32 ulp
// is 2^-20, so the bound is SCALE·128·2^-23·8 + 2^-20 = SCALE·2^-13 + 2^-20.
TEST(GoldenCases, BoundIsTheContractsFormulaAtAHandPoint) {
  HostCase h = one_hot_prefix();
  const ShardScores s = score_shard(h.args());
  const double scale = 1.4426950409f;
  EXPECT_EQ(s.bound[static_cast<std::size_t>(s.index(0, 0, 0))], scale * std::ldexp(1.0, -13) + std::ldexp(1.0, -20));
}

TEST(GoldenCases, SpeculativeTokensSeeDifferentPrefixesOfTheirBlock) {
  Case c;
  c.query_len = 2;
  c.world = 2;
  c.rank = 1;          // slot 0 holds block 1
  c.max_seq_len = 256;
  c.pages = 2;
  c.sm_scale = 0.5;
  c.seq_lens = {130};  // token 0 reaches position 128, token 1 reaches 129
  c.table_width = 2;
  c.table_row_stride = 2;
  c.block_table = {0, 1};
  HostCase h = zeroed(c);
  set_q(h, 0, 0, 0, 1.0f);
  set_q(h, 1, 0, 0, 1.0f);
  set_k(h, 1, 0, 0, 1.0f);
  set_k(h, 1, 1, 0, 3.0f);
  set_k(h, 1, 2, 0, 100.0f);  // past both cutoffs
  score_shard(h.args());
  const double scale = static_cast<float>(0.5 * 1.4426950409);
  EXPECT_EQ(out_at(h, 0, 0, 0), static_cast<float>(1.0 * scale));
  EXPECT_EQ(out_at(h, 0, 1, 0), static_cast<float>(3.0 * scale));
}

TEST(GoldenCases, NegInfWhereATokenReachesNoPositionOfItsBlock) {
  Case c;
  c.query_len = 4;
  c.max_seq_len = 256;
  c.pages = 2;
  c.seq_lens = {129};  // token t reaches positions < 126 + t
  c.table_width = 2;
  c.table_row_stride = 2;
  c.block_table = {1, 0};
  HostCase h = zeroed(c);
  for (int t = 0; t < 4; ++t) set_q(h, t, 0, 7, 1.0f);
  set_k(h, 0, 0, 7, 4.0f);  // block 1, position 128
  score_shard(h.args());
  for (int t = 0; t < 3; ++t) EXPECT_EQ(out_at(h, 0, t, 1), -INFINITY) << "token " << t;
  const double scale = static_cast<float>(c.sm_scale * 1.4426950409);
  EXPECT_EQ(out_at(h, 0, 3, 1), static_cast<float>(4.0 * scale));
  EXPECT_EQ(out_at(h, 0, 0, 0), 0.0f);  // block 0: all dots are 0
}

TEST(GoldenCases, MaxOfNegativeDotsAndPerHeadQueries) {
  Case c;
  c.heads = 2;
  c.sm_scale = 1.0;
  c.seq_lens = {10};
  c.block_table = {0};
  HostCase h = zeroed(c);
  set_q(h, 0, 0, 5, -1.0f);  // head 0: dots 2 − pos, largest at pos 0
  set_q(h, 0, 1, 6, 0.5f);   // head 1: dots 0.5·(−pos), largest 0 at pos 0
  for (int pos = 0; pos < 128; ++pos) {
    set_k(h, 0, pos, 5, static_cast<float>(pos - 2));
    set_k(h, 0, pos, 6, static_cast<float>(-pos));
  }
  score_shard(h.args());
  EXPECT_EQ(out_at(h, 0, 0, 0), 2.0f * 1.4426950409f);
  EXPECT_EQ(out_at(h, 1, 0, 0), 0.0f);
}

}  // namespace
}  // namespace ctxscore
