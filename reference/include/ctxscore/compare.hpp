// Judging a kernel's output against the reference: written finite slots
// within the bound, −inf exactly −inf, finite stays finite, and every
// element outside the written set bitwise what it held before the launch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ctxscore/score.hpp"
#include "ctxscore/selection.hpp"
#include "ctxscore/views.hpp"

namespace ctxscore {

enum class MismatchKind {
  outside_bound,       // finite, but further from the exact score than the bound
  expected_neg_inf,    // no position qualifies, yet the slot is not −inf
  lost_finite,         // the exact score is finite, the slot is not
  unwritten_changed,   // a slot of [:, :T, :L] the contract does not write was changed
  outside_view_changed // an element of out beyond [:, :T, :L] was changed
};
const char* mismatch_kind_name(MismatchKind k);

struct Coordinates {
  std::int64_t request = -1, token = -1, head = -1, row = -1, slot = -1, block = -1, page = -1;
  std::string str() const;
};

struct Mismatch {
  MismatchKind kind;
  Coordinates at;
  std::int64_t storage_offset = 0;
  double expected = 0;  // exact score (written) or the element's prior bits as float
  float got = 0;
  double bound = 0;
  std::string str() const;
};

struct CompareReport {
  std::int64_t written = 0, written_finite = 0, written_neg_inf = 0;
  std::int64_t written_negative = 0;  // finite and below zero: every qualifying score of the row negative
  std::int64_t unwritten_checked = 0;  // elements of out outside the written set
  std::int64_t mismatches = 0;
  double worst_ratio = 0;  // max |got − exact| / bound over finite written slots
  Coordinates worst_at;
  std::optional<Mismatch> first;
  std::optional<std::string> out_of_contract;
  std::optional<std::string> shape_problem;  // scores of the wrong size: nothing else was judged
  // The consumer's view of this rank (CONTRACT.md §9, M3's k = 16): its
  // local top-k from these scores against the reference's, near-ties
  // exempt, under each tie rule (higher block first, then lower).
  SelectionCheck selection, selection_lower_first;
  bool ok() const {
    return !out_of_contract && mismatches == 0 && selection.ok() && selection_lower_first.ok();
  }
  std::string summary() const;  // one line
};

// `layout` describes the out view inside `before`/`after` (both holding
// `elements` floats: the whole out allocation, snapshots before and after
// the launch). The view's data pointer is ignored; offsets are what count.
CompareReport compare(const ShardScores& ref, const ScoresView& layout, const float* before,
                      const float* after, std::int64_t elements);

// Judges the fresh dense [H, T, L] scores a scorer allocated itself (no out
// given, or one that did not fit): the written elements only, since the rest
// of a fresh buffer holds whatever the allocation held.
CompareReport compare_fresh(const ShardScores& ref, const float* fresh, std::int64_t elements);

// Adds to `r` every element of an allocation the call must not have written
// (a too-small out it was given) whose bits changed.
void check_untouched(CompareReport& r, const float* before, const float* after, std::int64_t elements);

}  // namespace ctxscore
