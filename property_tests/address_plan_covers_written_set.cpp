// The kernel's address plan, walked on the CPU: every program of a launch,
// every team of it, every slot the team scans, every active tile row. The set of out elements it
// writes equals the reference's written set (each exactly once), and every
// page, query and out address it forms stays inside its buffer. This is the
// CI coverage of the kernel's index logic on a machine without a GPU.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <set>
#include <utility>

#include "address_plan.hpp"
#include "ctxscore/harness/generators.hpp"
#include "scored_case.hpp"
#include "property_runner.hpp"

namespace ctxscore {
namespace {

struct Walk {
  std::vector<int> writes;  // per out element: how many times the plan writes it
  std::string problem;      // first address outside its buffer
};

Walk walk_launch(HostCase& host, int teams) {
  const ScoreArgs args = host.args();
  const Layout layout = validate(args);
  const Geometry g = host.spec.geometry ? apply_override(layout.geometry, *host.spec.geometry) : layout.geometry;
  const ScoreParams p = make_score_params(args, layout, g);
  Walk w;
  w.writes.assign(host.out.size(), 0);
  const auto fail = [&w](const std::string& m) {
    if (w.problem.empty()) w.problem = m;
  };
  const std::int64_t q_elems = static_cast<std::int64_t>(host.q.size());
  const std::int64_t table_width = args.block_table.shape[1];
  // One team of program (request i, chunk c): the slots it reads ahead and
  // the slots it scores.
  const auto walk_team = [&](std::int64_t i, std::int64_t c, const SlotRange& r, int team) {
    // The kernel reads page ids ahead: before the length is known, from the
    // team's first slot, and a few team slots past its range. Whatever it
    // reads must lie in the table, and no slot it scores may be skipped.
    const std::int64_t first = team_first_slot(p, c, team);
    for (std::int64_t j = first; j < std::max(first, r.last) + 8 * teams; j += teams) {
      if (slot_in_table(p, j) && slot_block(p, j) >= table_width) fail("table read past its width");
      if (j < r.last && !slot_in_table(p, j)) fail("scored slot " + std::to_string(j) + " judged outside the table");
    }
    if (r.empty()) return;
    for (std::int64_t j = first; j < r.last; j += teams) {
      const std::int64_t page = slot_page(p, i, j);
      if (page < 0 || page >= p.pages || page_offset(page) + kPageElems > p.pages * kPageElems)
        fail("page " + std::to_string(page) + " outside the cache");
      for (std::int64_t n = 0; n < p.tile_n; ++n) {
        if (!tile_row_active(p, n)) continue;
        const std::int64_t qo = tile_row_offset(p, i, n);
        if (qo < 0 || qo + kHeadDim > q_elems) fail("query row outside idx_q");
        const std::int64_t oo = out_slot_offset(p, out_row_offset(p, i, n), j);
        if (oo < 0 || oo >= static_cast<std::int64_t>(w.writes.size())) {
          fail("out offset " + std::to_string(oo) + " outside out");
          continue;
        }
        ++w.writes[static_cast<std::size_t>(oo)];
      }
    }
  };
  for (std::int64_t i = 0; i < g.grid_x; ++i)
    for (std::int64_t c = 0; c < g.grid_y; ++c) {
      const SlotRange r = program_range(p, c, p.lens[i]);
      if (!r.empty() && (r.first < 0 || r.last > p.local)) fail("slot range outside [0, L)");
      for (int team = 0; team < teams; ++team) walk_team(i, c, r, team);
    }
  return w;
}

TEST(AddressPlan, WritesExactlyTheReferenceWrittenSetOnce) {
  test::run_property(100, [] {
    gen::CaseLimits lim;
    lim.max_heads = 6;
    lim.max_query_len = 5;
    lim.max_world = 16;
    lim.forced_geometry = true;
    const Case c = *gen::genCase(lim);
    gen::classify(c);
    const int teams = *rc::gen::inRange(1, 5);
    RC_CLASSIFY(teams > 1, "several teams per program");
    auto s = test::score_case(c);
    const Walk w = walk_launch(s.host, teams);
    RC_ASSERT(w.problem == "");
    const ScoresView o = s.host.out_layout();
    std::vector<int> expected(w.writes.size(), 0);
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row = 0; row < c.tokens(); ++row)
        for (std::int64_t j = 0; j < c.local(); ++j)
          if (s.ref.is_written(row, j)) expected[static_cast<std::size_t>(o.offset(h, row, j))] = 1;
    RC_ASSERT(w.writes == expected);
  });
}

// The kernel shape: where programs fit the SMs, the fewest teams (one-page
// rings) that make a team's share of the chunk smallest; otherwise one team,
// with two-page rings only for a score step reading all 16 query rows past
// one wave of one-page programs. Whatever it picks, the platform has.
TEST(AddressPlan, KernelShapeSplitsAChunkIntoItsSmallestShares) {
  test::run_property(100, [] {
    const std::int64_t programs = *rc::gen::inRange<std::int64_t>(1, 5000), chunk = *rc::gen::inRange<std::int64_t>(1, 70);
    const std::int64_t sms = *rc::gen::inRange<std::int64_t>(1, 300);
    const int live = live_tile_rows(*rc::gen::inRange<std::int64_t>(1, 40));
    KernelLimits lim;
    lim.most_teams = *rc::gen::inRange(1, 5);
    lim.most_ring_pages = *rc::gen::inRange(1, 3);
    lim.one_page_teams_per_sm = *rc::gen::inRange(1, 5);
    const KernelShape k = choose_kernel_shape(programs, chunk, live, sms, lim);
    RC_ASSERT(shape_supported(k, lim));
    if (programs > sms || chunk == 1) RC_ASSERT(k.teams == 1);
    RC_ASSERT(k.ring_pages ==
              (live == 16 && programs > lim.one_page_teams_per_sm * sms && shape_supported({1, 2}, lim) ? 2 : 1));
    if (programs > sms) return;
    const auto share = [chunk](std::int64_t teams) { return (chunk + teams - 1) / teams; };
    for (int u = 1; u <= lim.most_teams; ++u) {
      RC_ASSERT(share(k.teams) <= share(u));
      if (u < k.teams) RC_ASSERT(share(u) > share(k.teams));
    }
  });
}

TEST(AddressPlan, KernelShapesAtTheM3Shapes) {
  // H200: 132 SMs, four one-page teams per SM, programs of up to four
  // one-page teams or two two-page ones.
  const KernelLimits h200{4, 2, 4};
  // Query rows read: H 4 × QL 1 (decode) and QL 4 (speculative decode).
  const int decode = live_tile_rows(4 * 1), speculative = live_tile_rows(4 * 4);
  EXPECT_EQ(decode, 4);
  EXPECT_EQ(speculative, 16);
  EXPECT_EQ(live_tile_rows(1), 4);
  EXPECT_EQ(live_tile_rows(5), 8);
  EXPECT_EQ(live_tile_rows(8), 8);
  EXPECT_EQ(live_tile_rows(9), 16);
  EXPECT_EQ(live_tile_rows(64), 16);  // H 16 × QL 4: four m-tiles, each read whole
  const auto shape = [&](std::int64_t programs, std::int64_t chunk, int live, const KernelLimits& lim) {
    const KernelShape k = choose_kernel_shape(programs, chunk, live, 132, lim);
    return std::pair{k.teams, k.ring_pages};
  };
  using P = std::pair<int, int>;
  for (const int live : {decode, speculative}) {
    EXPECT_EQ(shape(16, 4, live, h200), P(4, 1));     // batch 1, 32K: a slot per team
    EXPECT_EQ(shape(128, 4, live, h200), P(4, 1));    // batch 8, 32K
    EXPECT_EQ(shape(512, 4, live, h200), P(1, 1));    // batch 8, 128K and batch 1, 1M: one wave of 528
    EXPECT_EQ(shape(528, 4, live, h200), P(1, 1));
    EXPECT_EQ(shape(16, 3, live, h200), P(3, 1));
    EXPECT_EQ(shape(16, 5, live, h200), P(3, 1));     // a fourth team would not shorten 5 slots
    EXPECT_EQ(shape(16, 1, live, h200), P(1, 1));
    EXPECT_EQ(shape(132, 4, live, h200), P(4, 1));
    EXPECT_EQ(shape(133, 4, live, h200), P(1, 1));
  }
  // Past one wave: decode's light score step keeps one-page rings, the whole tile takes two.
  EXPECT_EQ(shape(529, 4, decode, h200), P(1, 1));
  EXPECT_EQ(shape(1024, 4, decode, h200), P(1, 1));   // batch 64, 32K
  EXPECT_EQ(shape(4096, 4, decode, h200), P(1, 1));   // batch 64, 128K and batch 8, 1M
  EXPECT_EQ(shape(529, 4, speculative, h200), P(1, 2));
  EXPECT_EQ(shape(1024, 4, speculative, h200), P(1, 2));
  EXPECT_EQ(shape(4096, 4, speculative, h200), P(1, 2));
  const KernelLimits amd{1, 1, 1};  // one team, the register stream
  EXPECT_EQ(shape(16, 4, speculative, amd), P(1, 1));
  EXPECT_EQ(shape(4096, 4, speculative, amd), P(1, 1));
}

// The launcher's chunking: one slot per program exactly where the
// contract's programs fit the multiprocessors and one-slot programs for
// every slot fit one wave of one-page programs; the contract's otherwise.
// Either way every local slot has a program and the batch keeps its column.
TEST(AddressPlan, LauncherSplitsIntoOneSlotProgramsOnlyWhereTheyFitOneWave) {
  test::run_property(100, [] {
    // Sizes drawn log-uniformly, so that small launches are common.
    const auto upto = [](int most_bits) { return *rc::gen::inRange<std::int64_t>(1, std::int64_t{1} << *rc::gen::inRange(1, most_bits)); };
    const std::int64_t batch = upto(9), world = *rc::gen::inRange<std::int64_t>(1, 9), max_seq_len = upto(22);
    const Geometry contract = launch_geometry(batch, max_seq_len, world, 4, 1);
    const std::int64_t sms = *rc::gen::inRange<std::int64_t>(1, 300);
    KernelLimits lim;
    lim.most_teams = *rc::gen::inRange(1, 5);
    lim.most_ring_pages = *rc::gen::inRange(1, 3);
    lim.one_page_teams_per_sm = *rc::gen::inRange(1, 5);
    const Geometry g = choose_chunking(contract, sms, lim);
    const bool split = contract.chunk > 1 && batch * contract.grid_y <= sms && batch * contract.local <= lim.one_page_teams_per_sm * sms;
    RC_CLASSIFY(split, "one slot per program");
    RC_ASSERT(g.grid_x == batch);
    RC_ASSERT(g.global == contract.global);
    RC_ASSERT(g.local == contract.local);
    RC_ASSERT(g.tile_n == contract.tile_n);
    RC_ASSERT(g.chunk == (split ? 1 : contract.chunk));
    RC_ASSERT(g.grid_y == (split ? contract.local : contract.grid_y));
    RC_ASSERT(g.grid_y * g.chunk >= g.local);
  });
}

TEST(AddressPlan, LauncherChunkingAtTheM3Shapes) {
  const KernelLimits h200{4, 2, 4};
  const auto chunking = [&](std::int64_t batch, std::int64_t context) {
    const Geometry g = choose_chunking(launch_geometry(batch, context, 4, 4, 1), 132, h200);
    return std::pair{g.chunk, g.grid_y};
  };
  using P = std::pair<std::int64_t, std::int64_t>;
  EXPECT_EQ(chunking(1, 32768), P(1, 64));      // 16 contract programs; 64 one-slot ones
  EXPECT_EQ(chunking(1, 131072), P(1, 256));    // 64; 256
  EXPECT_EQ(chunking(8, 32768), P(1, 64));      // 128; 512 of one wave's 528
  EXPECT_EQ(chunking(8, 131072), P(4, 64));     // 512 contract programs: past the SMs
  EXPECT_EQ(chunking(1, 1048576), P(4, 512));
  EXPECT_EQ(chunking(64, 32768), P(4, 16));
  const KernelLimits amd{1, 1, 1};
  const Geometry amd_small = choose_chunking(launch_geometry(1, 32768, 4, 4, 1), 104, amd);
  EXPECT_EQ(amd_small.chunk, 1);  // 64 one-slot programs, one per compute unit
  EXPECT_EQ(choose_chunking(launch_geometry(8, 32768, 4, 4, 1), 104, amd).chunk, 4);
}

TEST(AddressPlan, ReadsTheReferencePageOfEverySlot) {
  test::run_property(100, [] {
    const Case c = *gen::genCase({});
    auto s = test::score_case(c);
    const ScoreArgs args = s.host.args();
    const Layout layout = validate(args);
    const ScoreParams p = make_score_params(args, layout, layout.geometry);
    for (std::int64_t i = 0; i < c.batch(); ++i)
      for (std::int64_t j = 0; j < c.local(); ++j) {
        const std::int64_t want = s.ref.page[static_cast<std::size_t>(i * c.local() + j)];
        if (want >= 0) RC_ASSERT(slot_page(p, i, j) == want);
      }
  });
}

// Each active tile row n of a program reads the query of (token n / H,
// head n % H), writes that pair's output element, and sees the positions of
// block b before the contract's causal cutoff (len − QL + t + 1, restated
// here from the contract, as a prefix length in [0, 128]); the launch
// carries the contract's SCALE.
TEST(AddressPlan, PairsEachQueryRowWithItsOutputAndCutoff) {
  test::run_property(100, [] {
    gen::CaseLimits lim;
    lim.max_heads = 6;
    lim.max_query_len = 5;
    const Case c = *gen::genCase(lim);
    HostCase h = materialize(c);
    const ScoreArgs args = h.args();
    const Layout layout = validate(args);
    const ScoreParams p = make_score_params(args, layout, layout.geometry);
    RC_ASSERT(p.scale == scale_fp32(c.sm_scale));
    const ScoresView o = h.out_layout();
    const Case& r = h.spec;
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      const std::int64_t len = c.seq_lens[static_cast<std::size_t>(i)];
      for (std::int64_t n = 0; n < p.tile_n; ++n) {
        RC_ASSERT(tile_row_active(p, n) == (n < c.heads * c.query_len));
        if (n >= c.heads * c.query_len) continue;
        const std::int64_t t = n / c.heads, head = n % c.heads, row = i * c.query_len + t;
        RC_ASSERT(tile_row_offset(p, i, n) == row * r.q_token_stride + head * r.q_head_stride);
        for (std::int64_t j = 0; j < c.local(); ++j) {
          RC_ASSERT(out_offset(p, i, n, j) == o.offset(head, row, j));
          const std::int64_t b = j * c.world + c.rank;
          RC_ASSERT(tile_row_limit(p, len, n, b) == std::clamp<std::int64_t>(len - c.query_len + t + 1 - b * 128, 0, 128));
        }
      }
    }
  });
}

TEST(AddressPlan, PageOffsetsAre64Bit) {
  const std::int64_t top = (std::int64_t{1} << 17) + 7;
  EXPECT_EQ(page_offset(top), top * 16384);
  EXPECT_GT(page_offset(top), std::int64_t{1} << 31);
}

}  // namespace
}  // namespace ctxscore
