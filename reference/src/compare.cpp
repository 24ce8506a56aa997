#include "ctxscore/compare.hpp"

#include "ctxscore/bits.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

namespace ctxscore {

const char* mismatch_kind_name(MismatchKind k) {
  switch (k) {
    case MismatchKind::outside_bound: return "outside_bound";
    case MismatchKind::expected_neg_inf: return "expected_neg_inf";
    case MismatchKind::lost_finite: return "lost_finite";
    case MismatchKind::unwritten_changed: return "unwritten_changed";
    case MismatchKind::outside_view_changed: return "outside_view_changed";
  }
  return "?";
}

std::string Coordinates::str() const {
  std::ostringstream s;
  s << "request=" << request << " token=" << token << " head=" << head << " row=" << row
    << " slot=" << slot << " block=" << block << " page=" << page;
  return s.str();
}

std::string Mismatch::str() const {
  std::ostringstream s;
  s.precision(9);
  s << mismatch_kind_name(kind) << " at " << at.str() << " offset=" << storage_offset
    << " expected=" << expected << " got=" << got << " bound=" << bound;
  return s.str();
}

std::string CompareReport::summary() const {
  std::ostringstream s;
  s.precision(4);
  if (out_of_contract) {
    s << "OUT OF CONTRACT (not compared): " << *out_of_contract;
    return s.str();
  }
  if (shape_problem) {
    s << "MISMATCH " << *shape_problem;
    return s.str();
  }
  s << (ok() ? "ok" : "MISMATCH") << " written=" << written << " finite=" << written_finite
    << " neg_inf=" << written_neg_inf << " unwritten_checked=" << unwritten_checked
    << " mismatches=" << mismatches << " worst_ratio=" << worst_ratio;
  s << " " << selection.str();
  if (!selection_lower_first.ok()) s << "; lower block first: " << selection_lower_first.str();
  if (first) s << " first: " << first->str();
  return s.str();
}

namespace {

void record(CompareReport& r, const Mismatch& m) {
  ++r.mismatches;
  if (!r.first) r.first = m;
}

Coordinates coordinates(const ShardScores& ref, std::int64_t h, std::int64_t row, std::int64_t j) {
  const std::int64_t i = row / ref.query_len;
  return {i, row % ref.query_len, h, row, j, block_of_slot(j, ref.rank, ref.world),
          ref.page[static_cast<std::size_t>(i * ref.slots + j)]};
}

// One written element: −inf exactly −inf, finite stays finite and within the bound.
void judge_written(CompareReport& r, const ShardScores& ref, std::int64_t h, std::int64_t row, std::int64_t j,
                   std::int64_t off, float got) {
  ++r.written;
  const std::size_t e = static_cast<std::size_t>(ref.index(h, row, j));
  const double exact = ref.exact[e], bound = ref.bound[e];
  if (std::isinf(exact)) {
    ++r.written_neg_inf;
    if (!(std::isinf(got) && got < 0))
      record(r, {MismatchKind::expected_neg_inf, coordinates(ref, h, row, j), off, exact, got, 0});
    return;
  }
  ++r.written_finite;
  if (exact < 0) ++r.written_negative;
  if (!std::isfinite(got)) {
    record(r, {MismatchKind::lost_finite, coordinates(ref, h, row, j), off, exact, got, bound});
    return;
  }
  const double err = std::fabs(static_cast<double>(got) - exact);
  const double ratio = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
  if (ratio > r.worst_ratio || r.written_finite == 1) {
    r.worst_ratio = std::fmax(r.worst_ratio, ratio);
    r.worst_at = coordinates(ref, h, row, j);
  }
  if (!(err <= bound)) record(r, {MismatchKind::outside_bound, coordinates(ref, h, row, j), off, exact, got, bound});
}

// The rank's local top-k from the scores it wrote against the reference's.
// `got(h, row, j)` reads a written element.
template <typename Got>
void add_selection_view(CompareReport& r, const ShardScores& ref, const Got& got) {
  SelectionLayout l{ref.lens, ref.query_len, ref.heads, ref.global, ref.world};
  if (static_cast<std::int64_t>(l.lens.size()) != ref.batch || ref.heads * ref.tokens == 0) return;
  std::vector<float> mine(ref.exact.size(), std::numeric_limits<float>::quiet_NaN()), theirs(mine);
  for (std::int64_t h = 0; h < ref.heads; ++h)
    for (std::int64_t row = 0; row < ref.tokens; ++row)
      for (std::int64_t j = 0; j < ref.slots; ++j)
        if (ref.is_written(row, j)) {
          const std::size_t e = static_cast<std::size_t>(ref.index(h, row, j));
          mine[e] = got(h, row, j);
          theirs[e] = stored_value(ref.exact[e]);
        }
  for (const TieRule tie : {TieRule::higher_block_first, TieRule::lower_block_first}) {
    SelectionParams p;
    p.tie = tie;
    (tie == TieRule::higher_block_first ? r.selection : r.selection_lower_first) =
        check_selection(l, ref.rank, select_local(l, ref.rank, mine.data(), p),
                        select_local(l, ref.rank, theirs.data(), p), ref.exact, ref.bound, p);
  }
}

}  // namespace

CompareReport compare_fresh(const ShardScores& ref, const float* fresh, std::int64_t elements) {
  CompareReport r;
  if (ref.out_of_contract) {
    r.out_of_contract = ref.out_of_contract;
    return r;
  }
  const std::int64_t need = ref.heads * ref.tokens * ref.slots;
  if (elements != need) {
    r.shape_problem = "the fresh scores hold " + std::to_string(elements) + " elements, expected [H, T, L] = [" +
                      std::to_string(ref.heads) + ", " + std::to_string(ref.tokens) + ", " +
                      std::to_string(ref.slots) + "] = " + std::to_string(need);
    ++r.mismatches;
    return r;
  }
  for (std::int64_t h = 0; h < ref.heads; ++h)
    for (std::int64_t row = 0; row < ref.tokens; ++row)
      for (std::int64_t j = 0; j < ref.slots; ++j)
        if (ref.is_written(row, j)) {
          const std::int64_t off = ref.index(h, row, j);
          judge_written(r, ref, h, row, j, off, fresh[off]);
        }
  add_selection_view(r, ref, [&](std::int64_t h, std::int64_t row, std::int64_t j) { return fresh[ref.index(h, row, j)]; });
  return r;
}

CompareReport compare(const ShardScores& ref, const ScoresView& layout, const float* before,
                      const float* after, std::int64_t elements) {
  CompareReport r;
  if (ref.out_of_contract) {
    r.out_of_contract = ref.out_of_contract;
    return r;
  }
  std::vector<std::uint8_t> in_view(static_cast<std::size_t>(elements), 0);  // 1: in [:T,:L], 2: written
  for (std::int64_t h = 0; h < ref.heads; ++h)
    for (std::int64_t row = 0; row < ref.tokens; ++row)
      for (std::int64_t j = 0; j < ref.slots; ++j) {
        const std::int64_t off = layout.offset(h, row, j);
        if (!ref.is_written(row, j)) {
          in_view[static_cast<std::size_t>(off)] = 1;
          continue;
        }
        in_view[static_cast<std::size_t>(off)] = 2;
        judge_written(r, ref, h, row, j, off, after[off]);
      }
  for (std::int64_t off = 0; off < elements; ++off) {
    const std::uint8_t tag = in_view[static_cast<std::size_t>(off)];
    if (tag == 2) continue;
    ++r.unwritten_checked;
    if (float_bits(before[off]) == float_bits(after[off])) continue;
    Mismatch m{tag == 1 ? MismatchKind::unwritten_changed : MismatchKind::outside_view_changed, {}, off,
               before[off], after[off], 0};
    if (tag == 1 && !r.first) {  // coordinates of the first changed view element
      for (std::int64_t h = 0; h < ref.heads && m.at.row < 0; ++h)
        for (std::int64_t row = 0; row < ref.tokens && m.at.row < 0; ++row)
          for (std::int64_t j = 0; j < ref.slots; ++j)
            if (layout.offset(h, row, j) == off) {
              m.at = coordinates(ref, h, row, j);
              m.at.page = -1;
              break;
            }
    }
    record(r, m);
  }
  add_selection_view(r, ref, [&](std::int64_t h, std::int64_t row, std::int64_t j) { return after[layout.offset(h, row, j)]; });
  return r;
}

void check_untouched(CompareReport& r, const float* before, const float* after, std::int64_t elements) {
  for (std::int64_t off = 0; off < elements; ++off) {
    ++r.unwritten_checked;
    if (float_bits(before[off]) != float_bits(after[off]))
      record(r, {MismatchKind::outside_view_changed, {}, off, before[off], after[off], 0});
  }
}

}  // namespace ctxscore
