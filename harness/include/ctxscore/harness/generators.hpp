// RapidCheck generators named for the domain. They build one `Case` from
// small named pieces, so a shrunk counterexample is a small, readable case.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <climits>
#include <map>
#include <string>
#include <utility>
#include <cstdint>
#include <vector>

#include "ctxscore/case.hpp"
#include "ctxscore/harness/case_limits.hpp"
#include "ctxscore/harness/invariance.hpp"
#include "ctxscore/harness/out_mode.hpp"

namespace ctxscore::gen {

// A capture-stable bound S: small, block-aligned, off by one, or large.
inline rc::Gen<std::int64_t> genBound(const CaseLimits& lim) {
  const std::int64_t top = lim.max_bound;
  return rc::gen::weightedOneOf<std::int64_t>({
      {4, rc::gen::inRange<std::int64_t>(1, std::min<std::int64_t>(top, 1024) + 1)},
      {3, rc::gen::map(rc::gen::inRange<std::int64_t>(1, std::max<std::int64_t>(top / 128, 1) + 1),
                       [](std::int64_t k) { return k * 128; })},
      {2, rc::gen::map(rc::gen::inRange<std::int64_t>(1, std::max<std::int64_t>(top / 128, 1) + 1),
                       [](std::int64_t k) { return k * 128 + 1; })},
      {1, rc::gen::just(top)},
      {2, rc::gen::inRange<std::int64_t>(1, top + 1)},
  });
}

// sm_scale: upstream's 1/sqrt(128) most often (shrinks go there), else
// another positive value, a tiny or a large one, or a negative one (the max
// of the scaled scores, not the scaled max).
inline rc::Gen<double> genSmScale() {
  constexpr double kUpstream = 0.08838834764831845;
  return rc::gen::weightedOneOf<double>({
      {6, rc::gen::just(kUpstream)},
      {2, rc::gen::map(rc::gen::inRange(1, 1000), [](int k) { return k / 1000.0; })},
      {1, rc::gen::element(1e-6, 3e-5)},
      {1, rc::gen::element(4.0, 16.0)},
      {1, rc::gen::map(rc::gen::inRange(1, 1000), [](int k) { return -k / 1000.0; })},
  });
}

// A request length from the classes that matter for a bound and query length.
inline rc::Gen<std::int32_t> genSeqLen(std::int64_t bound, std::int64_t ql) {
  const auto len = [](std::int64_t v) { return static_cast<std::int32_t>(std::max<std::int64_t>(v, 0)); };
  const std::int64_t blocks = std::max<std::int64_t>(bound / 128, 1);
  return rc::gen::weightedOneOf<std::int32_t>({
      {2, rc::gen::element(len(0), len(1), len(ql - 1), len(ql), len(127), len(128), len(129))},
      {2, rc::gen::map(rc::gen::pair(rc::gen::inRange<std::int64_t>(1, blocks + 1), rc::gen::inRange(-1, 2)),
                       [len](std::pair<std::int64_t, int> kd) { return len(kd.first * 128 + kd.second); })},
      {1, rc::gen::just(len(bound))},
      {1, rc::gen::map(rc::gen::inRange<std::int64_t>(1, 300),
                       [len, bound](std::int64_t extra) { return len(bound + extra); })},  // past the bound: end clamps to G
      {4, rc::gen::map(rc::gen::inRange<std::int64_t>(0, bound + 1), len)},
      // Negative, as padded lengths become: the contract writes nothing for them.
      {1, rc::gen::element<std::int32_t>(-1, -127, -128, -129, -(1 << 20), INT32_MIN)},
  });
}

// The table entries past a request's reach, which no call may follow
// (CONTRACT.md §4): wild ids, so that a kernel reading one unclamped faults
// or reads poison.
// The picks come from one drawn seed: a draw per entry costs more than the
// rest of a large case.
inline void poison_past_reach(Case& c) {
  const std::int32_t wild[] = {INT32_MIN, -1, static_cast<std::int32_t>(c.pages), INT32_MAX};
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
  for (std::int64_t i = 0; i < c.batch(); ++i)
    for (std::int64_t b = std::max<std::int64_t>(reach_blocks(c.seq_lens[static_cast<std::size_t>(i)], c.global()), 0);
         b < c.table_width; ++b)
      c.table_entry(i, b) = wild[splitmix(seed + static_cast<std::uint64_t>(i * c.table_width + b)) % 4];
}

// A block table of `batch` rows of `width` ids over `pages` physical pages.
inline rc::Gen<std::vector<std::int32_t>> genPageTable(std::int64_t batch, std::int64_t width,
                                                        std::int64_t pages) {
  const std::size_t n = static_cast<std::size_t>(batch * width);
  // Past a few thousand entries RapidCheck's shrink tree of each entry costs
  // more than the rest of the case (a 64-request table of 8192 blocks took
  // 60 ms): one seed fills the table the same four ways, and its entries
  // shrink no more.
  if (n > 4096) {
    return rc::gen::map(rc::gen::pair(rc::gen::weightedElement<int>({{3, 0}, {1, 1}, {2, 2}, {3, 3}}),
                                      rc::gen::arbitrary<std::uint64_t>()),
                        [n, pages](const std::pair<int, std::uint64_t>& how) {
                          const std::int32_t wild[] = {-1, -7, static_cast<std::int32_t>(pages), static_cast<std::int32_t>(pages + 3),
                                                       1 << 20, INT32_MIN, INT32_MAX};
                          const auto draw = [&how](std::uint64_t e) { return splitmix(how.second + e); };
                          const auto page = [pages](std::uint64_t r) { return static_cast<std::int32_t>(r % static_cast<std::uint64_t>(pages)); };
                          std::vector<std::int32_t> v(n);
                          for (std::size_t e = 0; e < n; ++e) {
                            const std::uint64_t r = draw(e);
                            v[e] = how.first == 0   ? page(r)
                                   : how.first == 1 ? page(how.second)
                                   : how.first == 2 ? static_cast<std::int32_t>((e * 7919u + how.second) % static_cast<std::uint64_t>(pages))
                                   : (r >> 63)      ? page(r)
                                                    : wild[(r >> 32) % 7];
                          }
                          return v;
                        });
  }
  const auto in_range = rc::gen::inRange<std::int32_t>(0, static_cast<std::int32_t>(pages));
  const auto out_of_range = rc::gen::element<std::int32_t>(
      -1, -7, static_cast<std::int32_t>(pages), static_cast<std::int32_t>(pages + 3), 1 << 20, INT32_MIN, INT32_MAX);
  return rc::gen::weightedOneOf<std::vector<std::int32_t>>({
      {3, rc::gen::container<std::vector<std::int32_t>>(n, in_range)},
      {1, rc::gen::map(in_range, [n](std::int32_t p) { return std::vector<std::int32_t>(n, p); })},  // repeated
      {2, rc::gen::map(rc::gen::inRange<std::uint32_t>(0, UINT32_MAX),  // a permutation, cycled when short
                       [n, pages](std::uint32_t shift) {
                         std::vector<std::int32_t> v(n);
                         for (std::size_t e = 0; e < n; ++e)
                           v[e] = static_cast<std::int32_t>((e * 7919u + shift) % static_cast<std::uint64_t>(pages));
                         return v;
                       })},
      {3, rc::gen::container<std::vector<std::int32_t>>(
              n, rc::gen::weightedOneOf<std::int32_t>({{1, in_range}, {1, out_of_range}}))},
  });
}

// An explicit chunking of `local` slots: CHUNK = 1, CHUNK >= L, any CHUNK,
// and grids with extra programs that must only return; with it, half the
// time the kernel's own shape, else forced teams and ring pages (each
// forced or left to the kernel) that a program can hold.
inline rc::Gen<GeometryOverride> genGeometry(std::int64_t local, std::int64_t max_teams, std::int64_t max_ring_pages) {
  const std::int64_t L = std::max<std::int64_t>(local, 1);
  return rc::gen::exec([L, max_teams, max_ring_pages] {
    const std::int64_t chunk = *rc::gen::weightedOneOf<std::int64_t>({
        {1, rc::gen::just<std::int64_t>(1)},
        {1, rc::gen::inRange<std::int64_t>(L, 2 * L + 2)},
        {3, rc::gen::inRange<std::int64_t>(1, L + 1)},
    });
    const std::int64_t needed = ceil_div(L, chunk);
    const std::int64_t extra = *rc::gen::weightedOneOf<std::int64_t>(
        {{3, rc::gen::just<std::int64_t>(0)}, {1, rc::gen::inRange<std::int64_t>(1, 4)}});
    const std::int64_t ring = *rc::gen::weightedOneOf<std::int64_t>(
        {{2, rc::gen::just<std::int64_t>(0)}, {1, rc::gen::inRange<std::int64_t>(1, max_ring_pages + 1)}});
    const std::int64_t teams = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)},
         {1, rc::gen::inRange<std::int64_t>(1, max_teams / std::max<std::int64_t>(ring, 1) + 1)}});
    return GeometryOverride{chunk, needed + extra, teams, ring};
  });
}

// idx_q's strides: packed half the time, else padded with tokens outermost
// or heads outermost (a [H, T, 128] buffer viewed as [T, H, 128]). Paddings
// are mostly 16-byte multiples; sometimes odd, which rows of any alignment
// must survive.
inline void genQueryStrides(Case& c) {
  const int order = *rc::gen::weightedOneOf<int>({{2, rc::gen::just(0)}, {1, rc::gen::just(1)}, {1, rc::gen::just(2)}});
  if (order == 0) return;
  const std::int64_t inner = kHeadDim + *rc::gen::element<std::int64_t>(0, 8, 16, 1, 3);
  const std::int64_t pad = *rc::gen::element<std::int64_t>(0, 8, 5);
  if (order == 1) {
    c.q_head_stride = inner;
    c.q_token_stride = c.heads * inner + pad;
  } else {
    c.q_token_stride = inner;
    c.q_head_stride = std::max<std::int64_t>(c.tokens(), 1) * inner + pad;
  }
}

// Random per-dimension padding and stride order for `out`, so that larger
// buffers with their own strides keep their content outside the view.
inline void genOutLayout(Case& c) {
  const std::int64_t H = c.heads, R = c.tokens() + *rc::gen::inRange<std::int64_t>(0, 3),
                     S = c.local() + *rc::gen::inRange<std::int64_t>(0, 3);
  c.out_rows = R;
  c.out_slots = S;
  const int order = *rc::gen::inRange(0, 6);  // which dimension is innermost, and so on
  const std::int64_t pad = *rc::gen::inRange<std::int64_t>(0, 3);
  const std::int64_t dims[3] = {H, R, S};
  static constexpr int kOrders[6][3] = {{2, 1, 0}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {0, 1, 2}};
  std::int64_t strides[3] = {0, 0, 0}, next = 1;
  for (int k = 0; k < 3; ++k) {  // kOrders lists dimensions from innermost to outermost
    const int d = kOrders[order][k];
    strides[d] = next;
    next = next * dims[d] + pad;
  }
  c.out_head_stride = strides[0];
  c.out_row_stride = strides[1];
  c.out_slot_stride = strides[2];
}

// Halves the longest request until the reached (row, block) pairs fit `max_work`.
inline void shrink_to_budget(Case& c, std::int64_t max_work) {
  const auto work = [&c] {
    std::int64_t w = 0;
    for (std::int32_t len : c.seq_lens) w += std::max<std::int64_t>(reach_blocks(len, c.global()), 0);
    return w * c.heads * c.query_len / c.world;
  };
  while (work() > max_work) {
    auto longest = std::max_element(c.seq_lens.begin(), c.seq_lens.end());
    *longest /= 2;
  }
}

inline rc::Gen<Case> genCase(const CaseLimits& lim) {
  return rc::gen::exec([lim] {
    Case c;
    c.name = "random";
    c.seed = *rc::gen::arbitrary<std::uint32_t>();
    c.heads = *rc::gen::inRange<std::int64_t>(lim.min_heads, lim.max_heads + 1);
    c.query_len = *rc::gen::inRange<std::int64_t>(lim.min_query_len, lim.max_query_len + 1);
    c.world = *rc::gen::weightedOneOf<std::int64_t>(
        {{3, rc::gen::inRange<std::int64_t>(lim.min_world, lim.max_world + 1)}, {1, rc::gen::just(std::int64_t{lim.max_world})}});
    c.rank = lim.fixed_rank >= 0 ? std::min(lim.fixed_rank, c.world - 1) : *rc::gen::inRange<std::int64_t>(0, c.world);
    c.sm_scale = *genSmScale();
    c.pages = *rc::gen::inRange<std::int64_t>(1, lim.max_pages + 1);
    const std::int64_t batch = *rc::gen::inRange<std::int64_t>(1, lim.max_batch + 1);
    const std::int64_t rows = batch * c.query_len * c.heads;
    const std::int64_t bound_cap = std::max<std::int64_t>(lim.max_out_elems / rows, 1) * c.world * kBlockTokens;
    c.max_seq_len = std::min(*genBound(lim), bound_cap);
    c.seq_lens = *rc::gen::container<std::vector<std::int32_t>>(static_cast<std::size_t>(batch),
                                                                genSeqLen(c.max_seq_len, c.query_len));
    shrink_to_budget(c, lim.max_work);
    c.table_width = c.global() + (lim.strided_layouts ? *rc::gen::inRange<std::int64_t>(0, 3) : 0);
    c.table_row_stride = c.table_width + (lim.strided_layouts ? *rc::gen::inRange<std::int64_t>(0, 4) : 0);
    c.block_table = *genPageTable(batch, c.table_width, c.pages);
    poison_past_reach(c);
    if (lim.strided_layouts) genQueryStrides(c);
    // Coin flips through element(), which, unlike inRange(), does not
    // shrink its range with RapidCheck's size: small cases get them too.
    if (lim.strided_layouts && *rc::gen::element(false, true)) genOutLayout(c);
    if (lim.forced_geometry && *rc::gen::element(false, true)) c.geometry = *genGeometry(c.local(), lim.max_teams, lim.max_ring_pages);
    return c.resolved();
  });
}

// A case whose top-16 the scores decide: most requests reach past 16 slots
// at every rank, and every block has a page of its own, so that scores tie
// only by chance, never because two blocks read one page.
inline rc::Gen<Case> genSelectionCase(const CaseLimits& lim) {
  return rc::gen::exec([lim] {
    Case c = *genCase(lim);
    const std::int64_t longer = 20 * c.world * kBlockTokens + 1;  // 20 slots or more at every rank
    if (lim.max_bound > longer) {
      if (c.max_seq_len <= longer) {
        // A bound past 16 slots: the table, out and any forced chunking follow it.
        c.max_seq_len = *rc::gen::inRange<std::int64_t>(longer + 1, lim.max_bound + 1);
        c = c.with_packed_out();
        c.geometry.reset();
      }
      for (std::int32_t& len : c.seq_lens)
        if (*rc::gen::weightedElement<bool>({{7, true}, {1, false}}))
          len = static_cast<std::int32_t>(*rc::gen::inRange<std::int64_t>(longer, c.max_seq_len + 1));
    }
    shrink_to_budget(c, lim.max_work);
    c.table_width = std::max(c.table_width, c.global());
    c.table_row_stride = std::max(c.table_row_stride, c.table_width);
    c.block_table.resize(static_cast<std::size_t>(c.batch() * c.table_width));
    c.pages = std::max<std::int64_t>(c.batch() * c.table_width, 1);
    for (std::size_t e = 0; e < c.block_table.size(); ++e) c.block_table[e] = static_cast<std::int32_t>(e);
    return c.resolved();
  });
}

// How a call passes `out`: given in 3 of 5 calls (where stray writes past
// scan and a strided view's own strides show), absent (out=None, the path
// every caller outside graph capture takes) or too small (a fresh buffer
// too, the given one untouched) in 1 of 5 each.
inline rc::Gen<harness::OutMode> genOutMode() {
  using harness::OutMode;
  return rc::gen::weightedOneOf<OutMode>({{3, rc::gen::just(OutMode::given)},
                                          {1, rc::gen::just(OutMode::absent)},
                                          {1, rc::gen::just(OutMode::too_small)}});
}

// One case drawn outside a property (the fuzz command): the same generator,
// seeded, at RapidCheck's full size.
inline Case sample_case(const CaseLimits& lim, std::uint64_t seed) {
  return genCase(lim)(rc::Random(seed), 100).value();
}
inline harness::OutMode sample_out_mode(std::uint64_t seed) {
  return genOutMode()(rc::Random(seed ^ 0x5EEDull), 100).value();
}

// Another batch around one request of `c` (invariance.hpp): requests added,
// dropped, reordered, or ℓ ≤ 0 requests inserted; S, world, rank, H, QL,
// sm_scale, the pages and the request's length and table row kept. The
// other batch takes the launcher's own geometry and packed layouts.
// `how`, one of rebatching_kinds(), picks the way; empty: drawn.
inline const std::vector<std::string>& rebatching_kinds() {
  static const std::vector<std::string> kinds = {"gains requests", "loses requests", "is reordered",
                                                 "gains requests of length <= 0"};
  return kinds;
}
inline rc::Gen<harness::Rebatching> genRebatching(const Case& c, const std::string& how = "") {
  return rc::gen::exec([c, how] {
    const std::int64_t B = c.batch();
    harness::Rebatching r;
    r.from = *rc::gen::inRange<std::int64_t>(0, B);
    std::vector<std::int64_t> rows;  // the other batch's requests: c's index, or -1 for a new one
    const auto& kinds = rebatching_kinds();
    const int kind = how.empty() ? *rc::gen::element(0, 1, 2, 3)
                                 : static_cast<int>(std::find(kinds.begin(), kinds.end(), how) - kinds.begin());
    r.how = kinds.at(static_cast<std::size_t>(kind));
    const auto new_rows = [&rows](std::int64_t k) {
      for (std::int64_t n = 0; n < k; ++n)
        rows.insert(rows.begin() + *rc::gen::inRange<std::int64_t>(0, static_cast<std::int64_t>(rows.size()) + 1), -1);
    };
    for (std::int64_t i = 0; i < B; ++i) rows.push_back(i);
    if (kind == 0) {
      new_rows(*rc::gen::inRange<std::int64_t>(1, 5));
    } else if (kind == 1) {
      std::vector<std::int64_t> kept;
      for (std::int64_t i : rows)
        if (i == r.from || *rc::gen::element(false, true)) kept.push_back(i);
      if (kept.size() == rows.size() && B > 1) kept.erase(std::find_if(kept.begin(), kept.end(), [&r](std::int64_t i) { return i != r.from; }));
      rows = kept;
    } else if (kind == 2) {
      const std::uint32_t shift = *rc::gen::inRange<std::uint32_t>(1, 1000);
      std::rotate(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(shift % rows.size()), rows.end());
      std::reverse(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(*rc::gen::inRange<std::size_t>(0, rows.size() + 1)));
      if (std::is_sorted(rows.begin(), rows.end())) std::reverse(rows.begin(), rows.end());  // an order that changed
    } else {
      new_rows(*rc::gen::inRange<std::int64_t>(1, 5));
    }
    Case d = c.with_packed_out();
    d.q_token_stride = d.q_head_stride = 0;
    d.geometry.reset();
    d.seq_lens.clear();
    d.block_table.clear();
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const std::int64_t i = rows[k];
      if (i == r.from) r.to = static_cast<std::int64_t>(k);
      std::int32_t len = 0;
      if (i >= 0) len = c.seq_lens[static_cast<std::size_t>(i)];
      else if (kind == 3) len = *rc::gen::element<std::int32_t>(0, -1, -128, INT32_MIN);
      else len = *genSeqLen(c.max_seq_len, c.query_len);
      d.seq_lens.push_back(len);
      for (std::int64_t b = 0; b < c.table_width; ++b)
        d.block_table.push_back(i >= 0 ? c.table_entry(i, b)
                                       : *rc::gen::inRange<std::int32_t>(0, static_cast<std::int32_t>(c.pages)));
    }
    d.table_row_stride = d.table_width;
    r.batch = d.resolved();
    return r;
  });
}

// Whether the other batch `r` of `c` is what its way says: it gained
// requests, has fewer, holds them in another order (two or more).
inline bool rebatching_holds(const Case& c, const harness::Rebatching& r) {
  const std::int64_t from = c.batch(), to = r.batch.batch();
  if (r.how == "loses requests") return to < from;
  if (r.how == "is reordered") return from > 1 && to == from;
  return to > from;
}

// A first batch and another batch of it, the way `how` (one of
// rebatching_kinds()): over two requests or more where the way needs them
// (one request cannot be dropped around, nor reordered).
inline rc::Gen<std::pair<Case, harness::Rebatching>> genRebatchedCase(const CaseLimits& lim, const std::string& how) {
  return rc::gen::exec([lim, how] {
    Case c = *genCase(lim);
    if (c.batch() == 1 && (how == "loses requests" || how == "is reordered")) {
      c.seq_lens.push_back(*genSeqLen(c.max_seq_len, c.query_len));
      c.block_table.resize(static_cast<std::size_t>(2 * c.table_width), 0);
      c.q_token_stride = c.q_head_stride = 0;  // strides that follow T are packed anew
      c = c.with_packed_out().resolved();
      poison_past_reach(c);
    }
    harness::Rebatching r = *genRebatching(c, how);
    return std::pair{std::move(c), std::move(r)};
  });
}

// The edge classes a run's cases fell in. Each run owns one (run_campaign
// installs it for its thread: the gate runs checks side by side), and
// classify / count_class count into the one of the run on their thread;
// outside any run they count into a scratch one that nobody reads.
class Coverage {
 public:
  // What a probe throws where the case it draws is decided outside the
  // class it probes for: the rest of the case's work is not worth doing.
  struct Missed {};
  void count(const std::string& claim, bool hit) {
    if (hit) {
      ++counts_[claim];
    } else if (!probing_.empty() && claim == probing_) {
      missed_ = true;  // kept: whatever catches Missed, the probe sees it
      throw Missed{};
    }
  }
  std::int64_t held(const std::string& claim) const {
    const auto it = counts_.find(claim);
    return it == counts_.end() ? 0 : it->second;
  }
  const std::map<std::string, std::int64_t>& counts() const { return counts_; }
  void restore(std::map<std::string, std::int64_t> counts) { counts_ = std::move(counts); }
  // While set, a case counted outside `claim` throws Missed (empty: none).
  void probe(std::string claim) {
    probing_ = std::move(claim);
    missed_ = false;
  }
  // Whether the probe's case was counted outside its class.
  bool missed() const { return missed_; }

 private:
  std::map<std::string, std::int64_t> counts_;
  std::string probing_;
  bool missed_ = false;
};

namespace detail {
inline Coverage*& current_coverage() {
  thread_local Coverage* current = nullptr;
  return current;
}
}  // namespace detail

// The coverage of the run on this thread.
inline Coverage& coverage() {
  thread_local Coverage scratch;
  Coverage* c = detail::current_coverage();
  return c ? *c : scratch;
}

// Makes `c` this thread's coverage for the scope's life.
class CoverageScope {
 public:
  explicit CoverageScope(Coverage& c) : previous_(detail::current_coverage()) { detail::current_coverage() = &c; }
  ~CoverageScope() { detail::current_coverage() = previous_; }
  CoverageScope(const CoverageScope&) = delete;
  CoverageScope& operator=(const CoverageScope&) = delete;

 private:
  Coverage* previous_;
};

// Counts the current case in the edge class `claim` when `hit`.
inline void count_class(const std::string& claim, bool hit) { coverage().count(claim, hit); }

// Edge classes a case touches, each named once: a run's coverage counts
// them, and its floors are judged against them.
inline void classify(const Case& c, harness::OutMode out = harness::OutMode::given) {
  const std::int64_t G = c.global(), L = c.local();
  bool boundary = false, empty_here = false, past_bound = false, oob = false, zero = false, negative = false;
  for (std::int64_t i = 0; i < c.batch(); ++i) {
    const std::int64_t len = c.seq_lens[static_cast<std::size_t>(i)];
    boundary = boundary || (len > 0 && len % 128 == 0);
    zero = zero || len == 0;
    negative = negative || len < 0;
    past_bound = past_bound || len > c.max_seq_len;
    empty_here = empty_here || (len > 0 && scan_slots(len, G, L, c.rank, c.world) == 0);
  }
  for (std::int32_t id : c.block_table) oob = oob || id < 0 || id >= c.pages;
  bool oob_read = false, neg_inf = false;  // an out-of-range id a written slot reads; a written −inf
  for (std::int64_t i = 0; i < c.batch(); ++i) {
    const std::int64_t len = c.seq_lens[static_cast<std::size_t>(i)];
    for (std::int64_t j = 0; j < scan_slots(len, G, L, c.rank, c.world); ++j) {
      const std::int64_t b = block_of_slot(j, c.rank, c.world);
      const std::int32_t id = c.table_entry(i, b);
      oob_read = oob_read || id < 0 || id >= c.pages;
      neg_inf = neg_inf || qualifying_prefix(b, causal_cutoff(len, c.query_len, 0)) == 0;
    }
  }
  const bool strided_out = c.out_rows > c.tokens() || c.out_slots > c.local() || c.out_slot_stride != 1;
  const std::pair<bool, const char*> classes[] = {
      {boundary, "length on a block boundary"},
      {zero, "length 0"},
      {negative, "negative length"},
      {empty_here, "request leaves this rank empty"},
      {past_bound, "length past the bound"},
      {oob, "out-of-range page id"},
      {oob_read, "out-of-range page id read"},
      {neg_inf, "written -inf"},
      {c.query_len > 1, "speculative decode (QL > 1)"},
      {c.heads * c.query_len <= 4, "H*QL <= 4 (4 query rows read)"},
      {c.heads * c.query_len > 4 && c.heads * c.query_len <= 8, "H*QL in 5..8 (8 query rows read)"},
      {c.heads * c.query_len > 16, "H*QL > 16 (several m-tiles)"},
      {c.world == 1, "world 1"},
      {c.world >= 16, "world 16"},
      {c.rank >= 2, "rank >= 2"},
      {c.geometry.has_value(), "forced chunking"},
      {c.q_token_stride != c.heads * kHeadDim || c.q_head_stride != kHeadDim, "padded query strides"},
      {c.heads > 1 && c.q_head_stride > c.q_token_stride, "query heads outermost"},
      {c.q_head_stride % 8 != 0 || c.q_token_stride % 8 != 0, "query rows not 16-byte aligned"},
      {strided_out, "larger strided out"},
      {c.max_seq_len >= (1 << 16), "bound >= 2^16"},
      {c.sm_scale != 0.08838834764831845, "sm_scale other than 1/sqrt(128)"},
      {c.sm_scale < 0, "negative sm_scale"},
      {out == harness::OutMode::given, "out given"},
      {out == harness::OutMode::given && strided_out, "out given, larger and strided"},
      {out == harness::OutMode::absent, "out absent (fresh buffer)"},
      {out == harness::OutMode::too_small, "out too small (fresh buffer, given one untouched)"},
  };
  for (const auto& [hit, name] : classes) count_class(name, hit);
}

}  // namespace ctxscore::gen
