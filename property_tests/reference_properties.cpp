// Properties of the CPU reference itself: the claims of the contract that
// tie shards, bounds, pages and tokens together.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>
#include <map>

#include "ctxscore/harness/generators.hpp"
#include "ctxscore/compare.hpp"
#include "ctxscore/contents.hpp"
#include "property_runner.hpp"
#include "scored_case.hpp"

namespace ctxscore {
namespace {

using test::score_case;

gen::CaseLimits cpu_limits() { return {}; }

// The stored fp32 score of (head, row, logical block) of a rank's shard.
float stored(const test::ScoredCase& s, std::int64_t h, std::int64_t row, std::int64_t slot) {
  return s.host.out[static_cast<std::size_t>(s.host.out_layout().offset(h, row, slot))];
}

TEST(Reference, RanksPartitionTheReachedBlocks) {
  test::run_property(100, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    std::map<std::pair<std::int64_t, std::int64_t>, int> owners;  // (request, block) -> ranks writing it
    for (std::int64_t r = 0; r < c.world; ++r) {
      c.rank = r;
      const auto s = score_case(c);
      for (std::int64_t i = 0; i < c.batch(); ++i)
        for (std::int64_t j = 0; j < c.local(); ++j) {
          const bool w = s.ref.is_written(i * c.query_len, j);
          for (std::int64_t t = 1; t < c.query_len; ++t) RC_ASSERT(s.ref.is_written(i * c.query_len + t, j) == w);
          if (w) ++owners[{i, block_of_slot(j, r, c.world)}];
        }
    }
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      const std::int64_t end = reach_blocks(c.seq_lens[static_cast<std::size_t>(i)], c.global());
      for (std::int64_t b = 0; b < std::max<std::int64_t>(end, 0); ++b) {
        const auto key = std::make_pair(i, b);
        RC_ASSERT(owners[key] == 1);
        owners.erase(key);
      }
    }
    for (const auto& [key, n] : owners) RC_ASSERT(n == 0);  // nothing past `end` is written
  });
}

TEST(Reference, ShardsReassembleIntoWorldOne) {
  test::run_property(100, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    const Case whole = c.unsharded();
    const auto one = score_case(whole);
    for (std::int64_t r = 0; r < c.world; ++r) {
      c.rank = r;
      const auto shard = score_case(c);
      for (std::int64_t row = 0; row < c.tokens(); ++row)
        for (std::int64_t j = 0; j < c.local(); ++j) {
          const std::int64_t b = block_of_slot(j, r, c.world);
          if (b >= whole.local()) {
            RC_ASSERT(!shard.ref.is_written(row, j));
            continue;
          }
          RC_ASSERT(shard.ref.is_written(row, j) == one.ref.is_written(row, b));
          if (!shard.ref.is_written(row, j)) continue;
          for (std::int64_t h = 0; h < c.heads; ++h)
            RC_ASSERT(float_bits(stored(shard, h, row, j)) == float_bits(stored(one, h, row, b)));
        }
    }
  });
}

TEST(Reference, BoundIndependenceIsBitwise) {
  test::run_property(100, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    const std::int32_t longest = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
    // Two bounds at or past every length, sharing one block table wide enough for both.
    const std::int64_t lo = std::max<std::int64_t>(longest, 1) + *rc::gen::inRange<std::int64_t>(0, 200);
    const std::int64_t hi = lo + *rc::gen::inRange<std::int64_t>(0, 2000);
    Case a = c, b = c;
    a.max_seq_len = lo;
    b.max_seq_len = hi;
    for (Case* x : {&a, &b}) {
      x->table_width = global_blocks(hi);
      x->table_row_stride = x->table_width;
      x->block_table = std::vector<std::int32_t>(static_cast<std::size_t>(c.batch() * x->table_width));
      for (std::size_t e = 0; e < x->block_table.size(); ++e)
        x->block_table[e] = static_cast<std::int32_t>((e * 31 + c.seed) % static_cast<std::uint64_t>(c.pages));
      *x = x->with_packed_out();
    }
    const auto sa = score_case(a.resolved()), sb = score_case(b.resolved());
    for (std::int64_t row = 0; row < c.tokens(); ++row)
      for (std::int64_t j = 0; j < sb.ref.slots; ++j) {
        const bool wa = j < sa.ref.slots && sa.ref.is_written(row, j);
        RC_ASSERT(wa == sb.ref.is_written(row, j));
        if (!wa) continue;
        for (std::int64_t h = 0; h < c.heads; ++h)
          RC_ASSERT(float_bits(stored(sa, h, row, j)) == float_bits(stored(sb, h, row, j)));
      }
  });
}

// The table entry a written slot of request i reads, when one is written.
std::int32_t* written_entry(Case& c, std::int64_t i, std::int64_t j) {
  const std::int64_t scan = scan_slots(c.seq_lens[static_cast<std::size_t>(i)], c.global(), c.local(), c.rank, c.world);
  if (j >= scan) return nullptr;
  return &c.table_entry(i, block_of_slot(j, c.rank, c.world));
}

TEST(Reference, OutOfRangePageScoresAsItsClampedPage) {
  test::run_property(200, [] {
    Case c = *gen::genCase(cpu_limits());
    // Most cases get an out-of-range id where a written slot reads it.
    if (*rc::gen::weightedElement<bool>({{3, true}, {2, false}})) {
      const std::int64_t i = *rc::gen::inRange<std::int64_t>(0, c.batch());
      if (std::int32_t* id = written_entry(c, i, *rc::gen::inRange<std::int64_t>(0, std::max<std::int64_t>(c.local(), 1))))
        *id = *rc::gen::element<std::int32_t>(-1, INT32_MIN, static_cast<std::int32_t>(c.pages), INT32_MAX, 1 << 20);
    }
    gen::classify(c);
    Case clamped = c;
    for (std::int32_t& id : clamped.block_table) id = static_cast<std::int32_t>(clamp_page(id, c.pages));
    const auto raw = score_case(c), fixed = score_case(clamped);
    if (raw.host.out != fixed.host.out || raw.ref.page != fixed.ref.page) {
      test::note_failure(c, "scores or pages differ from the clamped table's");
      RC_FAIL("scores or pages differ from the clamped table's");
    }
  }, {{"out-of-range page id read", 0.30}});
}

TEST(Reference, PermutingPhysicalPagesChangesNothing) {
  test::run_property(100, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    std::vector<std::size_t> moved(static_cast<std::size_t>(c.pages));  // new page of old page p: moved[p]
    for (std::size_t p = 0; p < moved.size(); ++p) moved[p] = p;
    for (std::size_t k = moved.size(); k > 1; --k) std::swap(moved[k - 1], moved[*rc::gen::inRange<std::size_t>(0, k)]);
    auto base = score_case(c);
    HostCase permuted = materialize(c);
    for (std::size_t p = 0; p < moved.size(); ++p)
      std::copy_n(base.host.cache.begin() + static_cast<std::ptrdiff_t>(p * kPageElems), kPageElems,
                  permuted.cache.begin() + static_cast<std::ptrdiff_t>(moved[p] * kPageElems));
    for (std::int64_t i = 0; i < c.batch(); ++i)
      for (std::int64_t b = 0; b < c.table_width; ++b) {
        std::int32_t& id = permuted.table[static_cast<std::size_t>(i * c.table_row_stride + b)];
        id = static_cast<std::int32_t>(moved[static_cast<std::size_t>(clamp_page(id, c.pages))]);
      }
    score_shard(permuted.args());
    RC_ASSERT(base.host.out == permuted.out);
  });
}

TEST(Reference, LaterTokenWithTheSameQueryScoresAtLeastAsHigh) {
  test::run_property(100, [] {
    gen::CaseLimits lim = cpu_limits();
    lim.min_query_len = 2;
    Case c = *gen::genCase(lim);
    gen::classify(c);
    HostCase h = materialize(c);
    const std::int64_t i = *rc::gen::inRange<std::int64_t>(0, c.batch());
    const std::int64_t t1 = *rc::gen::inRange<std::int64_t>(0, c.query_len - 1);
    const std::int64_t t2 = *rc::gen::inRange<std::int64_t>(t1 + 1, c.query_len);
    const std::int64_t r1 = i * c.query_len + t1, r2 = i * c.query_len + t2;
    for (std::int64_t head = 0; head < c.heads; ++head)
      for (std::int64_t d = 0; d < kHeadDim; ++d)
        h.q[static_cast<std::size_t>(r2 * c.q_token_stride + head * c.q_head_stride + d)] =
            h.q[static_cast<std::size_t>(r1 * c.q_token_stride + head * c.q_head_stride + d)];
    const ShardScores s = score_shard(h.args());
    for (std::int64_t j = 0; j < c.local(); ++j) {
      if (!s.is_written(r1, j)) continue;
      for (std::int64_t head = 0; head < c.heads; ++head)
        RC_ASSERT(s.exact[static_cast<std::size_t>(s.index(head, r2, j))] >=
                  s.exact[static_cast<std::size_t>(s.index(head, r1, j))]);
    }
  });
}

TEST(Reference, NegInfExactlyWhereNoPositionQualifies) {
  test::run_property(200, [] {
    gen::CaseLimits lim = cpu_limits();
    lim.min_query_len = 2;
    Case c = *gen::genCase(lim);
    // Most cases get a request whose last reached block at this rank starts
    // after its first token's reach: 1..QL-1 tokens into block k·world + rank.
    if (*rc::gen::weightedElement<bool>({{3, true}, {2, false}})) {
      const std::int64_t blocks = (c.max_seq_len - 1) / kBlockTokens;  // last block a length <= S starts
      if (blocks >= c.rank) {
        const std::int64_t k = *rc::gen::inRange<std::int64_t>(0, (blocks - c.rank) / c.world + 1);
        const std::int64_t into = *rc::gen::inRange<std::int64_t>(1, c.query_len);
        c.seq_lens[static_cast<std::size_t>(*rc::gen::inRange<std::int64_t>(0, c.batch()))] =
            static_cast<std::int32_t>((k * c.world + c.rank) * kBlockTokens + into);
        gen::shrink_to_budget(c, lim.max_work);
      }
    }
    gen::classify(c);
    const auto s = score_case(c);
    for (std::int64_t row = 0; row < c.tokens(); ++row) {
      const std::int64_t i = row / c.query_len, t = row % c.query_len;
      const std::int64_t cutoff = causal_cutoff(c.seq_lens[static_cast<std::size_t>(i)], c.query_len, t);
      for (std::int64_t j = 0; j < c.local(); ++j) {
        if (!s.ref.is_written(row, j)) continue;
        const bool none = !position_qualifies(block_of_slot(j, c.rank, c.world), 0, cutoff);
        for (std::int64_t h = 0; h < c.heads; ++h) {
          const float v = stored(s, h, row, j);
          if ((std::isinf(v) && v < 0) != none || !(std::isfinite(v) || none)) {
            test::note_failure(c, "head " + std::to_string(h) + " row " + std::to_string(row) + " slot " +
                                      std::to_string(j) + ": stored " + std::to_string(v) +
                                      (none ? ", no position qualifies" : ", some position qualifies"));
            RC_FAIL("-inf where a position qualifies, or a finite score where none does");
          }
        }
      }
    }
  }, {{"written -inf", 0.20}});
}

TEST(Reference, UnwrittenElementsKeepTheirSentinel) {
  test::run_property(100, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    const auto s = score_case(c);
    const ScoresView o = s.host.out_layout();
    std::vector<char> written(s.host.out.size(), 0);
    for (std::int64_t h = 0; h < c.heads; ++h)
      for (std::int64_t row = 0; row < c.tokens(); ++row)
        for (std::int64_t j = 0; j < c.local(); ++j)
          if (s.ref.is_written(row, j)) written[static_cast<std::size_t>(o.offset(h, row, j))] = 1;
    for (std::size_t e = 0; e < written.size(); ++e)
      if (!written[e]) RC_ASSERT(float_bits(s.host.out[e]) == float_bits(c.sentinel));
      else RC_ASSERT(float_bits(s.host.out[e]) != float_bits(c.sentinel));
  });
}

// Every element of idx_q's buffer outside the view's rows is NaN, so that a
// kernel reading padding shows it.
TEST(Materialize, QueryPaddingIsNaN) {
  test::run_property(100, [] {
    const Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    const HostCase h = materialize(c);
    std::vector<char> in_row(h.q.size(), 0);
    for (std::int64_t t = 0; t < c.tokens(); ++t)
      for (std::int64_t head = 0; head < c.heads; ++head)
        for (std::int64_t d = 0; d < kHeadDim; ++d)
          in_row[static_cast<std::size_t>(t * c.q_token_stride + head * c.q_head_stride + d)] = 1;
    for (std::size_t e = 0; e < in_row.size(); ++e)
      if (!in_row[e] && !std::isnan(static_cast<float>(h.q[e]))) {
        test::note_failure(c, "idx_q element " + std::to_string(e) + " outside every row is not NaN");
        RC_FAIL("idx_q padding is not NaN");
      }
  }, {{"padded query strides", 0.20}});
}

// The materializer poisons what no written element reads (CONTRACT.md §4):
// the query rows of requests that scan nothing and every cache position past
// the reach of every slot that reads its page (whole pages no slot reads)
// hold the case's poison, and the table entries past a request's reach are
// wild. Replacing every poisoned value with finite data and in-range ids
// leaves the reference's scores, written set and pages bitwise the same.
TEST(Materialize, PoisonsWhatNoWrittenElementReads) {
  test::run_property(150, [] {
    const Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    HostCase poisoned = materialize(c);
    const std::uint16_t poison = poison_bits(c.seed);
    const auto is_poison = [poison](bf16 x) { return Eigen::numext::bit_cast<std::uint16_t>(x) == poison; };
    const std::int64_t G = c.global(), L = c.local(), H = c.heads, QL = c.query_len;
    std::vector<std::int64_t> seen(static_cast<std::size_t>(c.pages), 0);
    bool idle_request = false;
    for (std::int64_t i = 0; i < c.batch(); ++i) {
      const std::int32_t len = c.seq_lens[static_cast<std::size_t>(i)];
      const std::int64_t scan = scan_slots(len, G, L, c.rank, c.world);
      for (std::int64_t j = 0; j < scan; ++j) {
        const std::int64_t b = block_of_slot(j, c.rank, c.world);
        std::int64_t& s = seen[static_cast<std::size_t>(clamp_page(c.table_entry(i, b), c.pages))];
        s = std::max(s, std::min<std::int64_t>(len - b * kBlockTokens, kBlockTokens));
      }
      for (std::int64_t b = std::max<std::int64_t>(reach_blocks(len, G), 0); b < c.table_width; ++b)
        RC_ASSERT(c.table_entry(i, b) < 0 || c.table_entry(i, b) >= c.pages);
      idle_request = idle_request || scan == 0;
      for (std::int64_t t = i * QL; t < (i + 1) * QL; ++t)
        for (std::int64_t h = 0; h < H; ++h)
          RC_ASSERT(is_poison(poisoned.q[static_cast<std::size_t>(t * c.q_token_stride + h * c.q_head_stride)]) == (scan == 0));
    }
    gen::count_class("a request reads no query row", idle_request);
    gen::count_class("a page no slot reads", std::count(seen.begin(), seen.end(), 0) > 0);
    gen::count_class("a read page with a poisoned tail",
                     std::any_of(seen.begin(), seen.end(), [](std::int64_t s) { return s > 0 && s < kBlockTokens; }));
    for (std::int64_t p = 0; p < c.pages; ++p)
      for (std::int64_t pos = 0; pos < kBlockTokens; ++pos)
        RC_ASSERT(is_poison(poisoned.cache[static_cast<std::size_t>(p * kPageElems + pos * kHeadDim)]) ==
                  (pos >= seen[static_cast<std::size_t>(p)]));
    // The same call with every poisoned value replaced.
    HostCase clean = poisoned;
    for (bf16& x : clean.q)
      if (is_poison(x) || std::isnan(static_cast<float>(x))) x = bf16(0.5f);
    for (bf16& x : clean.cache)
      if (is_poison(x)) x = bf16(-0.25f);
    for (std::int64_t i = 0; i < c.batch(); ++i)
      for (std::int64_t b = std::max<std::int64_t>(reach_blocks(c.seq_lens[static_cast<std::size_t>(i)], G), 0); b < c.table_width; ++b)
        clean.table[static_cast<std::size_t>(i * c.table_row_stride + b)] = 0;
    const ShardScores a = score_shard(poisoned.args()), b = score_shard(clean.args());
    RC_ASSERT(!a.out_of_contract.has_value());
    RC_ASSERT(a.written == b.written);
    RC_ASSERT(a.page == b.page);
    for (std::size_t e = 0; e < a.exact.size(); ++e)
      RC_ASSERT(a.written[e % a.written.size()] == 0 || float_bits(static_cast<float>(a.exact[e])) == float_bits(static_cast<float>(b.exact[e])));
  }, {{"a request reads no query row", 0.20}, {"a page no slot reads", 0.30}, {"a read page with a poisoned tail", 0.20},
      {"negative length", 0.05}});
}

// The GEMM reference against the plain-loop scorer (no shared scoring code):
// same written set and pages, stored scores within the loops' bound.
// The floors here hold the generators to the ranges the suite relies on:
// ranks past 1, every kind of sm_scale, out-of-range ids a slot reads,
// every query-stride order, speculative rows and strided `out`.
TEST(Reference, AgreesWithThePlainLoopScorer) {
  test::run_property(300, [] {
    Case c = *gen::genCase(cpu_limits());
    gen::classify(c);
    HostCase h = materialize(c);
    const std::vector<float> before = h.out;
    ScoreArgs no_out = h.args();
    no_out.out.reset();
    const ShardScores naive = score_shard_naive(no_out);
    const ShardScores ref = score_shard(h.args());
    std::string why;
    if (ref.written != naive.written) why = "written sets differ";
    else if (ref.page != naive.page) why = "pages read differ";
    else if (const CompareReport r = compare(naive, h.out_layout(), before.data(), h.out.data(),
                                             static_cast<std::int64_t>(h.out.size()));
             !r.ok())
      why = r.summary();
    if (!why.empty()) {
      test::note_failure(c, why);
      RC_FAIL(why);
    }
  }, {{"rank >= 2", 0.10},
      {"sm_scale other than 1/sqrt(128)", 0.20},
      {"negative sm_scale", 0.02},
      {"out-of-range page id read", 0.10},
      {"query heads outermost", 0.04},
      {"speculative decode (QL > 1)", 0.25},
      {"larger strided out", 0.10},
      {"length past the bound", 0.05},
      {"request leaves this rank empty", 0.10}});
}

}  // namespace
}  // namespace ctxscore
