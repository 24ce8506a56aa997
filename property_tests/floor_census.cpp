// The coverage floors are met by construction, not by luck: over 10^4 run
// seeds, at every case size and at 1, 8 and unlimited compile keys, every
// case a floor's stratum draws holds the floor's class. Drawing alone, no
// backend: the census costs the reference's scoring of the drawn cases
// (label cpu); selection's over a tenth of the seeds, each draw scoring its
// case through the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "ctxscore/harness/checks.hpp"
#include "ctxscore/harness/compile_keys.hpp"
#include "ctxscore/harness/pipeline.hpp"
#include "ctxscore/score.hpp"

#ifndef CTXSCORE_FLOOR_CENSUS_SEEDS
#define CTXSCORE_FLOOR_CENSUS_SEEDS 10000
#endif
#include <cstdlib>

namespace ctxscore {
namespace {

// $CTXSCORE_FLOOR_CENSUS_SEEDS takes a census of another size.
const std::int64_t kSeeds = std::getenv("CTXSCORE_FLOOR_CENSUS_SEEDS") ? std::atoll(std::getenv("CTXSCORE_FLOOR_CENSUS_SEEDS"))
                                                                         : CTXSCORE_FLOOR_CENSUS_SEEDS;
constexpr std::int64_t kCases = 200;  // the gate's default run
const char* const kSizes[] = {"small", "large", "m3"};
constexpr std::int64_t kKeys[] = {1, 8, 0};

// The cases k < `cases` of a run that fall in `floor`'s stratum.
std::vector<std::int64_t> stratum(const harness::Floor& floor, const std::vector<harness::Floor>& floors,
                                  std::int64_t cases = kCases) {
  std::vector<std::int64_t> ks;
  for (std::int64_t k = 0; k < cases; ++k)
    if (const harness::Floor* f = harness::stratum_of(floors, k); f && f->claim == floor.claim) ks.push_back(k);
  return ks;
}

// Whether a written element of `c` scores below zero at every position it
// sees, by the naive scorer (the case source sums the contents itself).
// Only its requests that reach one block or less are scored (the others'
// lengths set to 0, so that every row keeps its contents): the stratum's
// row is one of them, and a long request would cost the naive scorer
// seconds at the GPU's sizes.
bool has_negative_row(const Case& whole) {
  Case c = whole;
  for (std::int32_t& len : c.seq_lens)
    if (reach_blocks(len, c.global()) > c.rank + 1) len = 0;
  HostCase h = materialize(c);
  const ShardScores s = score_shard_naive(h.args());
  if (s.out_of_contract) return false;
  for (std::int64_t head = 0; head < s.heads; ++head)
    for (std::int64_t row = 0; row < s.tokens; ++row)
      for (std::int64_t j = 0; j < s.slots; ++j) {
        const double e = s.exact[static_cast<std::size_t>(s.index(head, row, j))];
        if (s.is_written(row, j) && std::isfinite(e) && e < 0) return true;
      }
  return false;
}

TEST(Floors, FuzzsNegativeRowStratumHoldsItsClassAtEverySeedSizeAndKeyCount) {
  const std::vector<std::int64_t> ks = stratum(harness::kAllNegativeRowFloor, {harness::kAllNegativeRowFloor});
  ASSERT_GE(static_cast<double>(ks.size()), 0.04 * kCases);
  std::int64_t drawn = 0, unreachable = 0, missed = 0;
  for (std::int64_t seed = 0; seed < kSeeds; ++seed) {
    const char* size = kSizes[seed % 3];
    const std::int64_t keys = kKeys[seed / 3 % 3];
    const harness::CaseSource source(gen::named_limits(size), static_cast<std::uint64_t>(seed), keys);
    const std::int64_t k = ks[static_cast<std::size_t>(seed) % ks.size()];
    const auto c = source.draw_negative_row(harness::case_seed(static_cast<std::uint64_t>(seed), "fuzz", k), harness::case_size(k));
    if (!c) {
      // Only where no key of the run writes anything at all: its rank owns no block under its bound.
      EXPECT_TRUE(source.limited()) << "seed " << seed << ": an unlimited run can always write";
      for (const Case& p : source.prototypes()) EXPECT_GE(p.rank, p.global()) << "seed " << seed << ": " << p.str();
      ++unreachable;
      continue;
    }
    ++drawn;
    if (!has_negative_row(c->value())) {
      ++missed;
      ADD_FAILURE() << "seed " << seed << ", size " << size << ", " << keys << " keys, case " << k
                    << ": drawn to hold a negative row, holds none: " << c->value().str();
    }
  }
  std::printf("fuzz's negative-row stratum over %lld seeds: %lld drawn, %lld held, %lld runs whose keys write nothing\n",
              static_cast<long long>(kSeeds), static_cast<long long>(drawn), static_cast<long long>(drawn - missed),
              static_cast<long long>(unreachable));
  EXPECT_EQ(missed, 0);
}

TEST(Floors, BatchInvariancesStrataHoldTheirWayAtEverySeedAndSize) {
  std::vector<harness::Floor> floors;
  for (const std::string& how : gen::rebatching_kinds()) floors.push_back({harness::kRebatchedClassPrefix + how, 0.25});
  std::int64_t missed = 0;
  for (std::int64_t seed = 0; seed < kSeeds; ++seed) {
    const std::int64_t k = seed % kCases;
    const harness::Floor* f = harness::stratum_of(floors, k);
    ASSERT_NE(f, nullptr) << "case " << k << " is in no stratum: every batch_invariance case is";
    const std::string how = f->claim.substr(std::string(harness::kRebatchedClassPrefix).size());
    const auto [c, r] = gen::genRebatchedCase(gen::named_limits(kSizes[seed % 3]), how)(
                            rc::Random(harness::case_seed(static_cast<std::uint64_t>(seed), "batch_invariance", k)),
                            harness::case_size(k))
                            .value();
    if (!gen::rebatching_holds(c, r)) {
      ++missed;
      ADD_FAILURE() << "seed " << seed << ", case " << k << ": drawn to " << how << ", the other batch " << r.str();
    }
  }
  EXPECT_EQ(missed, 0);
}

TEST(Floors, SelectionsStratumDecidesMostRowsAtEverySeedAndSize) {
  constexpr std::int64_t kSelectionCases = 30;  // the gate's default selection run
  const std::vector<std::int64_t> ks = stratum(harness::kMostRowsDecidedFloor, {harness::kMostRowsDecidedFloor}, kSelectionCases);
  ASSERT_GE(static_cast<double>(ks.size()), 0.45 * kSelectionCases);
  std::int64_t missed = 0, drawn = 0;
  // A draw scores its case through the reference: a tenth of the seeds keeps the census in seconds.
  for (std::int64_t seed = 0; seed < kSeeds; seed += 10) {
    const std::int64_t k = ks[static_cast<std::size_t>(seed / 10) % ks.size()];
    const char* size = kSizes[seed / 10 % 3];
    const Case c = harness::selection_stratum_case(size, harness::case_seed(static_cast<std::uint64_t>(seed), "selection", k),
                                                   harness::case_size(k));
    ++drawn;
    if (const harness::RowsDecided d = harness::rows_decided(c); !d.most()) {
      ++missed;
      ADD_FAILURE() << "seed " << seed << ", size " << size << ", case " << k << ": drawn to decide most rows, decides "
                    << d.decided << " of " << d.rows << ": " << c.str();
    }
  }
  std::printf("selection's stratum: %lld cases drawn, %lld held\n", static_cast<long long>(drawn),
              static_cast<long long>(drawn - missed));
  EXPECT_EQ(missed, 0);
}

}  // namespace
}  // namespace ctxscore
