#include "ctxscore/selection.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "ctxscore/bits.hpp"

namespace ctxscore {

namespace {

constexpr std::uint64_t kKeyMark = std::uint64_t{1} << 48;
constexpr std::uint64_t kBlockField = 0xFFFF;

// Keys in selection order: the largest first.
void sort_keys(std::vector<std::uint64_t>& keys) { std::sort(keys.begin(), keys.end(), std::greater<>()); }

}  // namespace

const char* tie_rule_name(TieRule t) {
  return t == TieRule::higher_block_first ? "higher_block_first" : "lower_block_first";
}

std::string SelectionParams::str() const {
  std::ostringstream s;
  s << "k=" << k << " tie=" << tie_rule_name(tie) << " init_blocks=" << init_blocks << " local_keep=" << local_keep
    << " init_score=" << init_score << " local_score=" << local_score;
  return s.str();
}

std::uint32_t ordered_score_bits(float score) {
  if (std::isnan(score)) return 0;
  std::uint32_t u = float_bits(score);
  if (u == 0x80000000u) u = 0;  // −0 competes as +0
  return u ^ ((u & 0x80000000u) ? 0xFFFFFFFFu : 0x80000000u);
}

float score_of_ordered(std::uint32_t ordered) {
  return bits_float((ordered & 0x80000000u) ? ordered ^ 0x80000000u : ~ordered);
}

float forced_score(float score, std::int64_t block, std::int64_t causal_blocks_t, const SelectionParams& p) {
  if (block < p.init_blocks) return p.init_score;
  if (block >= max64(0, causal_blocks_t - p.local_keep)) return p.local_score;
  return score;
}

std::uint64_t pack_key(float score, std::int64_t block, TieRule tie) {
  const std::uint64_t field = tie == TieRule::higher_block_first ? static_cast<std::uint64_t>(block + 1)
                                                                 : kBlockField - static_cast<std::uint64_t>(block);
  return kKeyMark | (static_cast<std::uint64_t>(ordered_score_bits(score)) << 16) | field;
}

KeyParts unpack_key(std::uint64_t key, TieRule tie) {
  KeyParts k;
  if ((key & kKeyMark) == 0) return k;
  k.candidate = true;
  k.ordered = static_cast<std::uint32_t>(key >> 16);
  const std::int64_t field = static_cast<std::int64_t>(key & kBlockField);
  k.block = tie == TieRule::higher_block_first ? field - 1 : static_cast<std::int64_t>(kBlockField) - field;
  return k;
}

std::vector<std::uint64_t> local_topk_keys(const SelectionLayout& l, std::int64_t rank, const float* shard,
                                           std::int64_t h, std::int64_t row, const SelectionParams& p) {
  const std::int64_t i = row / l.query_len, t = row % l.query_len, L = l.local(), T = l.tokens();
  const std::int64_t cb = causal_blocks(l.lens[static_cast<std::size_t>(i)], l.query_len, t);
  const std::int64_t scan_t = token_scan_slots(cb, L, rank, l.world);
  std::vector<std::uint64_t> keys;
  for (std::int64_t j = 0; j < scan_t; ++j) {
    const std::int64_t b = block_of_slot(j, rank, l.world);
    if (!slot_is_candidate(j, scan_t, b, l.global, cb)) continue;
    const float s = forced_score(shard[(h * T + row) * L + j], b, cb, p);
    keys.push_back(pack_key(s, b, p.tie));
  }
  sort_keys(keys);
  keys.resize(static_cast<std::size_t>(p.k), 0);
  return keys;
}

std::vector<std::int32_t> merge_topk(const std::vector<std::uint64_t>& gathered, std::int64_t causal_blocks_t,
                                     const SelectionParams& p) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t key : gathered) {
    const KeyParts parts = unpack_key(key, p.tie);
    if (!parts.candidate) continue;
    const float s = forced_score(score_of_ordered(parts.ordered), parts.block, causal_blocks_t, p);
    keys.push_back(pack_key(s, parts.block, p.tie));
  }
  sort_keys(keys);
  std::vector<std::int32_t> out(static_cast<std::size_t>(p.k), -1);
  const std::int64_t n = min64(p.k, max64(causal_blocks_t, 0));
  for (std::int64_t e = 0; e < n && e < static_cast<std::int64_t>(keys.size()); ++e)
    out[static_cast<std::size_t>(e)] = static_cast<std::int32_t>(unpack_key(keys[static_cast<std::size_t>(e)], p.tie).block);
  return out;
}

Selection select_blocks(const SelectionLayout& l, const std::vector<const float*>& shards, const SelectionParams& p) {
  Selection s{l.heads, l.tokens(), p.k, {}};
  s.blocks.assign(static_cast<std::size_t>(s.heads * s.tokens * s.k), -1);
  for (std::int64_t h = 0; h < l.heads; ++h)
    for (std::int64_t row = 0; row < s.tokens; ++row) {
      std::vector<std::uint64_t> gathered;
      for (std::int64_t r = 0; r < l.world; ++r) {
        const std::vector<std::uint64_t> local = local_topk_keys(l, r, shards[static_cast<std::size_t>(r)], h, row, p);
        gathered.insert(gathered.end(), local.begin(), local.end());
      }
      const std::int64_t cb = causal_blocks(l.lens[static_cast<std::size_t>(row / l.query_len)], l.query_len, row % l.query_len);
      const std::vector<std::int32_t> merged = merge_topk(gathered, cb, p);
      std::copy(merged.begin(), merged.end(), s.blocks.begin() + (h * s.tokens + row) * s.k);
    }
  return s;
}

Selection select_local(const SelectionLayout& l, std::int64_t rank, const float* shard, const SelectionParams& p) {
  Selection s{l.heads, l.tokens(), p.k, {}};
  s.blocks.assign(static_cast<std::size_t>(s.heads * s.tokens * s.k), -1);
  for (std::int64_t h = 0; h < l.heads; ++h)
    for (std::int64_t row = 0; row < s.tokens; ++row) {
      const std::vector<std::uint64_t> keys = local_topk_keys(l, rank, shard, h, row, p);
      for (std::int64_t e = 0; e < p.k; ++e)
        s.blocks[static_cast<std::size_t>((h * s.tokens + row) * s.k + e)] =
            static_cast<std::int32_t>(unpack_key(keys[static_cast<std::size_t>(e)], p.tie).block);
    }
  return s;
}

std::string SelectionCheck::str() const {
  std::ostringstream s;
  s.precision(4);
  s << "selection " << matched << "/" << rows << " rows matched, " << decided << " decided, " << near_ties
    << " near-ties, " << unexplained
    << " unexplained, worst margin ";
  if (worst_margin >= 1e300) s << "none";
  else s << worst_margin;
  if (!first_unexplained.empty()) s << "; first: " << first_unexplained;
  return s.str();
}

namespace {

struct Candidate {
  std::int64_t block;
  double exact, bound;
};

// The candidates of (head h, row) in this view, with the value each
// competes with (forced blocks: their forced score, bound 0), best first;
// by_block[b] is block b's entry (block −1 where b is no candidate).
std::vector<Candidate> ranked_candidates(const SelectionLayout& l, std::int64_t rank, std::int64_t h, std::int64_t row,
                                         const std::vector<double>& exact, const std::vector<double>& bound,
                                         const SelectionParams& p, std::vector<Candidate>* by_block) {
  const std::int64_t T = l.tokens(), L = l.local();
  const std::int64_t cb = causal_blocks(l.lens[static_cast<std::size_t>(row / l.query_len)], l.query_len, row % l.query_len);
  const std::int64_t scan_t = token_scan_slots(cb, L, rank, l.world);
  std::vector<Candidate> cands;
  if (by_block) by_block->assign(static_cast<std::size_t>(max64(l.global, 0)), Candidate{-1, 0, 0});
  for (std::int64_t j = 0; j < scan_t; ++j) {
    const std::int64_t b = block_of_slot(j, rank, l.world);
    if (!slot_is_candidate(j, scan_t, b, l.global, cb)) continue;
    const std::size_t e = static_cast<std::size_t>((h * T + row) * L + j);
    const bool is_forced = b < p.init_blocks || b >= max64(0, cb - p.local_keep);
    const Candidate cand{b, is_forced ? static_cast<double>(forced_score(0.0f, b, cb, p)) : exact[e], is_forced ? 0.0 : bound[e]};
    cands.push_back(cand);
    if (by_block) (*by_block)[static_cast<std::size_t>(b)] = cand;
  }
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) { return a.exact > b.exact; });
  return cands;
}

// (s_k − s_{k+1}) / (bound_k + bound_{k+1}); none (1e300) without a (k+1)-th
// candidate, or where only forced scores meet (the tie rule decides alike).
double boundary_margin(const std::vector<Candidate>& cands, std::int64_t k) {
  if (static_cast<std::int64_t>(cands.size()) <= k) return 1e300;
  const Candidate& kth = cands[static_cast<std::size_t>(k - 1)];
  const Candidate& next = cands[static_cast<std::size_t>(k)];
  const double sum = kth.bound + next.bound;
  return sum > 0 ? (kth.exact - next.exact) / sum : 1e300;
}

}  // namespace

std::vector<double> selection_margins(const SelectionLayout& l, std::int64_t rank, const std::vector<double>& exact,
                                      const std::vector<double>& bound, const SelectionParams& p) {
  std::vector<double> m(static_cast<std::size_t>(l.heads * l.tokens()));
  for (std::int64_t h = 0; h < l.heads; ++h)
    for (std::int64_t row = 0; row < l.tokens(); ++row)
      m[static_cast<std::size_t>(h * l.tokens() + row)] =
          boundary_margin(ranked_candidates(l, rank, h, row, exact, bound, p, nullptr), p.k);
  return m;
}

SelectionCheck check_selection(const SelectionLayout& l, std::int64_t rank, const Selection& got,
                               const Selection& want, const std::vector<double>& exact,
                               const std::vector<double>& bound, const SelectionParams& p) {
  SelectionCheck c;
  const std::int64_t T = l.tokens();
  std::vector<Candidate> by_block;
  for (std::int64_t h = 0; h < l.heads; ++h)
    for (std::int64_t row = 0; row < T; ++row) {
      ++c.rows;
      const double margin = boundary_margin(ranked_candidates(l, rank, h, row, exact, bound, p, &by_block), p.k);
      c.worst_margin = std::min(c.worst_margin, margin);
      if (margin <= 1) ++c.near_ties;
      else if (margin < 1e300) ++c.decided;
      // The block sets.
      std::vector<std::int64_t> gs, ws;
      for (std::int64_t e = 0; e < p.k; ++e) {
        if (got.at(h, row)[e] >= 0) gs.push_back(got.at(h, row)[e]);
        if (want.at(h, row)[e] >= 0) ws.push_back(want.at(h, row)[e]);
      }
      std::sort(gs.begin(), gs.end());
      std::sort(ws.begin(), ws.end());
      if (gs == ws) {
        ++c.matched;
        continue;
      }
      std::ostringstream why;
      why.precision(9);
      why << "head " << h << " row " << row << ": ";
      bool explained = gs.size() == ws.size();
      if (!explained) why << "selected " << gs.size() << " blocks, expected " << ws.size();
      for (std::int64_t x : gs) {
        if (!explained) break;
        if (std::binary_search(ws.begin(), ws.end(), x)) continue;
        if (x >= l.global || by_block[static_cast<std::size_t>(x)].block < 0) {
          why << "selected block " << x << ", which is not a candidate of this row";
          explained = false;
          break;
        }
        for (std::int64_t y : ws) {
          if (std::binary_search(gs.begin(), gs.end(), y)) continue;
          const Candidate& cx = by_block[static_cast<std::size_t>(x)];
          const Candidate& cy = by_block[static_cast<std::size_t>(y)];
          if (cy.exact - cx.exact > cx.bound + cy.bound) {
            why << "selected block " << x << " (exact " << cx.exact << ", bound " << cx.bound << ") over block " << y
                << " (exact " << cy.exact << ", bound " << cy.bound << "): margin "
                << (cy.exact - cx.exact) / (cx.bound + cy.bound) << " bounds";
            explained = false;
            break;
          }
        }
      }
      if (explained) continue;
      ++c.unexplained;
      if (c.first_unexplained.empty()) c.first_unexplained = why.str();
    }
  return c;
}

}  // namespace ctxscore
