// The consumer of the shard scores (CONTRACT.md §9): each rank's top-k over
// its shard as packed keys, the merge over ranks, and the output block ids.
// The tie rule and the forced blocks are parameters: upstream's AMD path
// breaks equal scores toward the higher block id, its NVIDIA path toward the
// lower one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ctxscore/contract.hpp"

namespace ctxscore {

enum class TieRule : std::uint8_t { higher_block_first, lower_block_first };
const char* tie_rule_name(TieRule t);

struct SelectionParams {
  std::int64_t k = 16;                        // M3 selects 16 blocks
  TieRule tie = TieRule::higher_block_first;  // upstream's AMD path
  std::int64_t init_blocks = 1;               // valid blocks b < init_blocks are forced to init_score
  std::int64_t local_keep = 1;                // valid blocks b >= causal_blocks − local_keep are forced to local_score
  float init_score = 1e30f;
  float local_score = 1e29f;
  std::string str() const;
};

// §9: the token's causal reach in tokens and in blocks (≤ 0 when it reaches nothing).
CTXSCORE_HD constexpr std::int64_t causal_blocks(std::int64_t len, std::int64_t query_len, std::int64_t token) {
  return ceil_div(causal_cutoff(len, query_len, token), kBlockTokens);
}
// §9: scan_t, the local slots the consumer reads for token t.
CTXSCORE_HD constexpr std::int64_t token_scan_slots(std::int64_t causal_blocks_t, std::int64_t local,
                                                    std::int64_t rank, std::int64_t world) {
  return min64(local, ceil_div(max64(causal_blocks_t - rank, 0), world));
}
// §9: whether slot j (block b) is a candidate of token t.
CTXSCORE_HD constexpr bool slot_is_candidate(std::int64_t slot, std::int64_t scan_t, std::int64_t block,
                                             std::int64_t global, std::int64_t causal_blocks_t) {
  return slot < scan_t && block < global && block < causal_blocks_t;
}

// §9: fp32 bits mapped so that unsigned order is score order; −0 as +0, NaN as 0.
std::uint32_t ordered_score_bits(float score);
// The score a candidate competes with: forced for the init and local-window blocks.
float forced_score(float score, std::int64_t block, std::int64_t causal_blocks_t, const SelectionParams& p);
// §9: 2^48 | ordered(score) << 16 | block field. The block field is b + 1 when
// the higher block wins ties, 0xFFFF − b when the lower one does: unsigned
// key order is then selection order either way. 0 is no candidate.
std::uint64_t pack_key(float score, std::int64_t block, TieRule tie);
struct KeyParts {
  bool candidate = false;
  std::uint32_t ordered = 0;  // ordered_score_bits of the score
  std::int64_t block = -1;
};
KeyParts unpack_key(std::uint64_t key, TieRule tie);
// The fp32 score whose ordered bits these are (−0 comes back as +0, NaN as the bits 0 map from).
float score_of_ordered(std::uint32_t ordered);

// The rows and shards a selection runs over: `lens` gives B, T = B·QL.
struct SelectionLayout {
  std::vector<std::int32_t> lens;
  std::int64_t query_len = 1, heads = 1, global = 1, world = 1;
  std::int64_t local() const { return local_slots(global, world); }
  std::int64_t tokens() const { return static_cast<std::int64_t>(lens.size()) * query_len; }
};

// Block ids per (head, row): [H, T, k], in selection order, −1 past the candidates.
struct Selection {
  std::int64_t heads = 0, tokens = 0, k = 0;
  std::vector<std::int32_t> blocks;
  const std::int32_t* at(std::int64_t h, std::int64_t row) const { return blocks.data() + (h * tokens + row) * k; }
};

// One rank's top-k keys for (head h, row): `shard` is the rank's dense
// [H, T, L] scores (only the slots the consumer may read are touched).
std::vector<std::uint64_t> local_topk_keys(const SelectionLayout& l, std::int64_t rank, const float* shard,
                                           std::int64_t h, std::int64_t row, const SelectionParams& p);
// §9's merge of the gathered keys of every rank for one row: block ids [k].
std::vector<std::int32_t> merge_topk(const std::vector<std::uint64_t>& gathered, std::int64_t causal_blocks_t,
                                     const SelectionParams& p);
// The whole pipeline: every rank's local top-k, gathered and merged.
// shards[r] is rank r's dense [H, T, L] scores.
Selection select_blocks(const SelectionLayout& l, const std::vector<const float*>& shards, const SelectionParams& p);
// One rank's local top-k alone, decoded to block ids (what that rank contributes).
Selection select_local(const SelectionLayout& l, std::int64_t rank, const float* shard, const SelectionParams& p);

// Two selections of the same rows judged against exact scores: a different
// block set is allowed only where the exact scores of every block that one
// selects and the other does not lie within the sum of their contract
// bounds (a near-tie: two correct scorers may pick either). The view is
// rank `rank` of `l.world` (the merged pipeline: rank 0 of world 1);
// `exact` and `bound` are its dense [H, T, L] per slot.
struct SelectionCheck {
  std::int64_t rows = 0;        // (head, row) pairs judged
  std::int64_t matched = 0;     // same block set
  std::int64_t near_ties = 0;   // rows whose exact k-th and (k+1)-th candidates lie within their bounds
  std::int64_t decided = 0;     // rows with a (k+1)-th candidate beyond the bounds: the selection is a real choice
  std::int64_t unexplained = 0; // different sets without a near-tie to explain them
  double worst_margin = 1e300;  // smallest (s_k − s_{k+1}) / (bound_k + bound_{k+1}) over the rows
  std::string first_unexplained;
  bool ok() const { return unexplained == 0; }
  std::string str() const;
};
// Per (head, row), [H, T]: (s_k − s_{k+1}) / (bound_k + bound_{k+1}) over
// the view's exact candidate scores; 1e300 where there is no (k+1)-th
// candidate or only forced scores meet. At most 1: a near-tie.
std::vector<double> selection_margins(const SelectionLayout& l, std::int64_t rank, const std::vector<double>& exact,
                                      const std::vector<double>& bound, const SelectionParams& p);
SelectionCheck check_selection(const SelectionLayout& l, std::int64_t rank, const Selection& got, const Selection& want,
                               const std::vector<double>& exact, const std::vector<double>& bound,
                               const SelectionParams& p);

}  // namespace ctxscore
