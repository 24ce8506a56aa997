// The registry of named cases: names unique, every corpus case judged
// through the harness loop (reference against the plain-loop scorer, `out`
// given, absent and too small), and the benchmark shapes laid out as the
// benchmark needs them (every shard page distinct, no page read twice).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ctxscore/bits.hpp"
#include "ctxscore/harness/judge.hpp"
#include "ctxscore/harness/named_cases.hpp"
#include "scored_case.hpp"

namespace ctxscore {
namespace {

using harness::CaseFamily;
using harness::named_cases;
using harness::OutMode;

TEST(NamedCases, NamesAreUniqueAndEachLineReplaysTheCase) {
  std::set<std::string> names;
  for (const harness::NamedCase& n : named_cases()) {
    EXPECT_TRUE(names.insert(n.spec.name).second) << "two cases named " << n.spec.name;
    EXPECT_EQ(n.spec.str().find('\n'), std::string::npos) << n.spec.name;
    EXPECT_EQ(n.spec.str(), n.spec.resolved().str()) << "not resolved: " << n.spec.name;
    EXPECT_FALSE(n.what.empty()) << n.spec.name;
  }
  EXPECT_EQ(harness::named_case("upstream_unpopulated_table").family, CaseFamily::upstream);
  try {
    harness::named_case("no_such_case");
    FAIL() << "an unknown name was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("upstream_two_requests_rank0"), std::string::npos) << e.what();
  }
}

TEST(NamedCases, EveryCorpusCasePassesOnTheReferenceInEveryOutMode) {
  const auto reference = harness::make_backend("reference");
  std::int64_t judged = 0;
  for (const Case& c : harness::corpus_cases())
    for (OutMode out : {OutMode::given, OutMode::absent, OutMode::too_small}) {
      harness::JudgeOptions o;
      o.out = out;
      o.write_failure = false;
      const harness::Verdict v = harness::run_and_judge(*reference, c, o);
      EXPECT_TRUE(v.ok()) << c.name << ": " << v.str();
      EXPECT_EQ(v.oracle, "plain-loop scorer");
      ++judged;
    }
  EXPECT_EQ(judged, 3 * static_cast<std::int64_t>(harness::corpus_cases().size()));
}

// Each peer case at every rank of worlds 1, 2, 4 and 8: judged against the
// plain-loop scorer, and each rank's written columns bitwise the world-1
// columns of their blocks.
TEST(NamedCases, PeerCasesHoldAtEveryRankOfWorlds1248) {
  const auto reference = harness::make_backend("reference");
  std::int64_t judged = 0, peers = 0;
  // The judged call's scores, dense [H, T, L], NaN where nothing is written.
  const auto judged_scores = [&](const Case& c) {
    HostCase host = materialize(c);
    harness::JudgeOptions o;
    o.write_failure = false;
    std::vector<float> scores;
    const harness::Verdict v = harness::run_and_judge(*reference, host, o, &scores);
    EXPECT_TRUE(v.ok()) << v.str();
    ++judged;
    return scores;
  };
  for (const harness::NamedCase& n : named_cases()) {
    if (n.family != CaseFamily::peer) continue;
    ++peers;
    const std::vector<Case> shards = harness::at_every_rank_of_worlds_1_2_4_8(n.spec);
    ASSERT_EQ(shards.front().world, 1);
    const Case& one = shards.front();
    const std::vector<float> whole = judged_scores(one);
    ASSERT_FALSE(whole.empty()) << n.spec.name;
    for (std::size_t k = 1; k < shards.size(); ++k) {
      const Case& c = shards[k];
      SCOPED_TRACE(c.name + " world " + std::to_string(c.world) + " rank " + std::to_string(c.rank));
      const std::vector<float> shard = judged_scores(c);
      ASSERT_FALSE(shard.empty());
      for (std::int64_t h = 0; h < c.heads; ++h)
        for (std::int64_t row = 0; row < c.tokens(); ++row)
          for (std::int64_t j = 0; j < c.local(); ++j) {
            const std::int64_t b = block_of_slot(j, c.rank, c.world);
            if (b >= one.local()) continue;
            const float got = shard[static_cast<std::size_t>((h * c.tokens() + row) * c.local() + j)];
            const float want = whole[static_cast<std::size_t>((h * one.tokens() + row) * one.local() + b)];
            ASSERT_EQ(std::isnan(got), std::isnan(want)) << "head " << h << " row " << row << " slot " << j;
            if (!std::isnan(got)) {
              ASSERT_EQ(float_bits(got), float_bits(want)) << "head " << h << " row " << row << " slot " << j;
            }
          }
    }
  }
  EXPECT_GT(peers, 0);
  EXPECT_EQ(peers, static_cast<std::int64_t>(harness::family_cases(CaseFamily::peer).size()));
  EXPECT_EQ(judged, 15 * peers);
}

TEST(NamedCases, BenchmarkShapesReadEveryShardPageOnce) {
  std::int64_t shapes = 0;
  for (const harness::NamedCase& n : named_cases()) {
    if (n.family != CaseFamily::benchmark) continue;
    ++shapes;
    const Case& c = n.spec;
    SCOPED_TRACE(c.name);
    std::set<std::int32_t> pages;
    std::int64_t read = 0;
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      EXPECT_EQ(c.seq_lens[static_cast<std::size_t>(i)], c.max_seq_len);
      const std::int64_t scan = scan_slots(c.seq_lens[static_cast<std::size_t>(i)], c.global(), c.local(), c.rank, c.world);
      for (std::int64_t j = 0; j < scan; ++j, ++read) {
        const std::int32_t id = c.table_entry(i, block_of_slot(j, c.rank, c.world));
        EXPECT_GE(id, 0);
        EXPECT_LT(id, c.pages);
        pages.insert(id);
      }
    }
    EXPECT_EQ(static_cast<std::int64_t>(pages.size()), read) << "a page is read twice";
    EXPECT_TRUE(n.upstream_us == 0 || c.query_len == 1) << "upstream times are for decode (QL 1)";
  }
  EXPECT_EQ(shapes, 19);
}

}  // namespace
}  // namespace ctxscore
