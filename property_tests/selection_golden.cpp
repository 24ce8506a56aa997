// The consumer's selection on cases worked out by hand (CONTRACT.md §9): the
// key order, both tie rules, forcing, NaN and −inf, −1 padding, the merge
// over ranks, and the block field at the key's limit (G = 0xFFFE).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ctxscore/selection.hpp"

namespace ctxscore {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SelectionGolden, OrderedBitsFollowTheScoreOrder) {
  EXPECT_EQ(ordered_score_bits(0.0f), 0x80000000u);
  EXPECT_EQ(ordered_score_bits(-0.0f), 0x80000000u);  // −0 competes as +0
  EXPECT_EQ(ordered_score_bits(1.0f), 0xBF800000u);
  EXPECT_EQ(ordered_score_bits(-1.0f), 0x407FFFFFu);
  EXPECT_EQ(ordered_score_bits(-kInf), 0x007FFFFFu);
  EXPECT_EQ(ordered_score_bits(kInf), 0xFF800000u);
  EXPECT_EQ(ordered_score_bits(std::nanf("")), 0u);  // below −inf
  const float ascending[] = {-kInf, -1e30f, -1.0f, -1e-45f, 0.0f, 1e-45f, 1.0f, 1e30f, kInf};
  for (std::size_t e = 1; e < sizeof ascending / sizeof ascending[0]; ++e)
    EXPECT_LT(ordered_score_bits(ascending[e - 1]), ordered_score_bits(ascending[e])) << ascending[e];
  EXPECT_EQ(score_of_ordered(ordered_score_bits(-2.5f)), -2.5f);
  EXPECT_EQ(score_of_ordered(ordered_score_bits(7.0f)), 7.0f);
}

TEST(SelectionGolden, PackedKeysAtHandPoints) {
  // 2^48 | 0xBF800000 << 16 | (5 + 1)
  EXPECT_EQ(pack_key(1.0f, 5, TieRule::higher_block_first), 0x1BF8000000006ull);
  // the lower block first: the field is 0xFFFF − 5
  EXPECT_EQ(pack_key(1.0f, 5, TieRule::lower_block_first), 0x1BF800000FFFAull);
  // NaN keys sit just above "no candidate" (0)
  EXPECT_EQ(pack_key(std::nanf(""), 0, TieRule::higher_block_first), 0x1000000000001ull);
  EXPECT_GT(pack_key(-kInf, 0, TieRule::higher_block_first), pack_key(std::nanf(""), 70, TieRule::higher_block_first));
  // G = 0xFFFE, the most the key holds: its last block round-trips under both rules.
  for (TieRule tie : {TieRule::higher_block_first, TieRule::lower_block_first}) {
    const KeyParts k = unpack_key(pack_key(-3.0f, 0xFFFD, tie), tie);
    EXPECT_TRUE(k.candidate);
    EXPECT_EQ(k.block, 0xFFFD);
    EXPECT_EQ(score_of_ordered(k.ordered), -3.0f);
    EXPECT_EQ(unpack_key(pack_key(-3.0f, 0, tie), tie).block, 0);
  }
  EXPECT_EQ(pack_key(1.0f, 0xFFFD, TieRule::higher_block_first) & 0xFFFF, 0xFFFEu);
  EXPECT_EQ(pack_key(1.0f, 0xFFFD, TieRule::lower_block_first) & 0xFFFF, 2u);
  EXPECT_FALSE(unpack_key(0, TieRule::higher_block_first).candidate);
}

// One request of `len` tokens, QL 1, one head, world 1: slot j is block j.
SelectionLayout one_row(std::int32_t len, std::int64_t global) { return {{len}, 1, 1, global, 1}; }

SelectionParams unforced(std::int64_t k, TieRule tie) {
  SelectionParams p;
  p.k = k;
  p.tie = tie;
  p.init_blocks = 0;
  p.local_keep = 0;
  return p;
}

std::vector<std::int32_t> selected(const SelectionLayout& l, const std::vector<float>& scores, const SelectionParams& p) {
  const Selection s = select_blocks(l, {scores.data()}, p);
  return {s.at(0, 0), s.at(0, 0) + s.k};
}

TEST(SelectionGolden, EqualScoresFollowTheTieRule) {
  const SelectionLayout l = one_row(512, 4);  // 4 candidate blocks
  const std::vector<float> scores(4, 2.0f);
  EXPECT_EQ(selected(l, scores, unforced(2, TieRule::higher_block_first)), (std::vector<std::int32_t>{3, 2}));
  EXPECT_EQ(selected(l, scores, unforced(2, TieRule::lower_block_first)), (std::vector<std::int32_t>{0, 1}));
  // −0 and +0 tie like equal scores.
  const std::vector<float> zeros = {0.0f, -0.0f, 0.0f, -0.0f};
  EXPECT_EQ(selected(l, zeros, unforced(2, TieRule::higher_block_first)), (std::vector<std::int32_t>{3, 2}));
  EXPECT_EQ(selected(l, zeros, unforced(2, TieRule::lower_block_first)), (std::vector<std::int32_t>{0, 1}));
}

TEST(SelectionGolden, InitAndLocalWindowBlocksAreForced) {
  // 6 blocks reached; block 0 forced to 1e30, blocks 4 and 5 (the last two) to 1e29.
  const SelectionLayout l = one_row(6 * 128, 6);
  SelectionParams p = unforced(3, TieRule::higher_block_first);
  p.init_blocks = 1;
  p.local_keep = 2;
  const std::vector<float> scores = {-9.0f, 50.0f, 60.0f, 70.0f, -8.0f, -7.0f};
  EXPECT_EQ(selected(l, scores, p), (std::vector<std::int32_t>{0, 5, 4}));
  p.tie = TieRule::lower_block_first;
  EXPECT_EQ(selected(l, scores, p), (std::vector<std::int32_t>{0, 4, 5}));
  p.k = 4;
  EXPECT_EQ(selected(l, scores, p), (std::vector<std::int32_t>{0, 4, 5, 3}));
}

TEST(SelectionGolden, NanRanksBelowNegativeInfinityAndPaddingIsMinusOne) {
  const SelectionLayout l = one_row(3 * 128, 3);
  const std::vector<float> scores = {std::nanf(""), 1.0f, -kInf};
  EXPECT_EQ(selected(l, scores, unforced(2, TieRule::higher_block_first)), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(selected(l, scores, unforced(5, TieRule::higher_block_first)), (std::vector<std::int32_t>{1, 2, 0, -1, -1}));
  // A token reaching 2 blocks under a bound of 3: block 2 is no candidate.
  EXPECT_EQ(selected(one_row(200, 3), scores, unforced(3, TieRule::higher_block_first)), (std::vector<std::int32_t>{1, 0, -1}));
}

TEST(SelectionGolden, MergeOverTwoRanks) {
  // 4 blocks, world 2: rank 0 holds blocks 0 and 2, rank 1 blocks 1 and 3.
  SelectionLayout l = one_row(512, 4);
  l.world = 2;
  const std::vector<float> rank0 = {5.0f, 1.0f}, rank1 = {3.0f, 5.0f};
  const SelectionParams p = unforced(3, TieRule::higher_block_first);
  const Selection s = select_blocks(l, {rank0.data(), rank1.data()}, p);
  EXPECT_EQ(std::vector<std::int32_t>(s.at(0, 0), s.at(0, 0) + 3), (std::vector<std::int32_t>{3, 0, 1}));
  const Selection low = select_blocks(l, {rank0.data(), rank1.data()}, unforced(3, TieRule::lower_block_first));
  EXPECT_EQ(std::vector<std::int32_t>(low.at(0, 0), low.at(0, 0) + 3), (std::vector<std::int32_t>{0, 3, 1}));
  // Each rank keeps only its own top-k: with k = 1, rank 0 offers block 0, rank 1 block 3.
  const std::vector<std::uint64_t> keys0 = local_topk_keys(l, 0, rank0.data(), 0, 0, unforced(1, TieRule::higher_block_first));
  ASSERT_EQ(keys0.size(), 1u);
  EXPECT_EQ(unpack_key(keys0[0], TieRule::higher_block_first).block, 0);
}

TEST(SelectionGolden, SpeculativeTokensSeeTheirOwnReach) {
  // QL 2, length 129: token 0 reaches 128 positions (1 block), token 1 129 (2 blocks).
  const SelectionLayout l{{129}, 2, 1, 2, 1};
  const std::vector<float> scores = {1.0f, 9.0f, 1.0f, 9.0f};  // [H=1, T=2, L=2]
  const Selection s = select_blocks(l, {scores.data()}, unforced(2, TieRule::higher_block_first));
  EXPECT_EQ(std::vector<std::int32_t>(s.at(0, 0), s.at(0, 0) + 2), (std::vector<std::int32_t>{0, -1}));
  EXPECT_EQ(std::vector<std::int32_t>(s.at(0, 1), s.at(0, 1) + 2), (std::vector<std::int32_t>{1, 0}));
}

TEST(SelectionGolden, CheckExemptsNearTiesAndNothingElse) {
  const SelectionLayout l = one_row(3 * 128, 3);
  const SelectionParams p = unforced(1, TieRule::higher_block_first);
  const std::vector<double> exact = {1.0, 1.5, 3.0}, bound = {0.3, 0.3, 0.1};
  const std::vector<float> want_scores = {1.0f, 1.5f, 3.0f};
  const Selection want = select_blocks(l, {want_scores.data()}, p);  // block 2
  // Block 1 over block 2: 3.0 − 1.5 = 1.5 > 0.3 + 0.1: no near-tie explains it.
  const std::vector<float> wrong = {1.0f, 9.0f, 3.0f};
  const SelectionCheck bad = check_selection(l, 0, select_blocks(l, {wrong.data()}, p), want, exact, bound, p);
  EXPECT_EQ(bad.unexplained, 1);
  EXPECT_NE(bad.first_unexplained.find("selected block 1"), std::string::npos) << bad.first_unexplained;
  // With k = 2 the boundary is between blocks 1 (1.5) and 0 (1.0): 0.5 ≤ 0.6, a near-tie.
  const SelectionParams two = unforced(2, TieRule::higher_block_first);
  const std::vector<float> flipped = {1.2f, 1.2f, 3.0f};  // within both bounds; block 1 wins the tie
  const std::vector<float> flipped_low = {1.3f, 1.25f, 3.0f};  // block 0 over block 1
  const Selection want2 = select_blocks(l, {want_scores.data()}, two);
  const SelectionCheck ok = check_selection(l, 0, select_blocks(l, {flipped_low.data()}, two), want2, exact, bound, two);
  EXPECT_EQ(ok.unexplained, 0) << ok.str();
  EXPECT_EQ(ok.near_ties, 1);
  EXPECT_DOUBLE_EQ(ok.worst_margin, 0.5 / 0.6);
  EXPECT_EQ(check_selection(l, 0, select_blocks(l, {flipped.data()}, two), want2, exact, bound, two).matched, 1);
}

}  // namespace
}  // namespace ctxscore
