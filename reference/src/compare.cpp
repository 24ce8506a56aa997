#include "ctxscore/compare.hpp"

#include <cmath>
#include <cstring>
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
  s << (ok() ? "ok" : "MISMATCH") << " written=" << written << " finite=" << written_finite
    << " neg_inf=" << written_neg_inf << " unwritten_checked=" << unwritten_checked
    << " mismatches=" << mismatches << " worst_ratio=" << worst_ratio;
  if (first) s << " first: " << first->str();
  return s.str();
}

namespace {

std::uint32_t bits(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

}  // namespace

CompareReport compare(const ShardScores& ref, const ScoresView& layout, const float* before,
                      const float* after, std::int64_t elements) {
  CompareReport r;
  if (ref.out_of_contract) {
    r.out_of_contract = ref.out_of_contract;
    return r;
  }
  std::vector<std::uint8_t> in_view(static_cast<std::size_t>(elements), 0);  // 1: in [:T,:L], 2: written
  const auto record = [&r](Mismatch m) {
    ++r.mismatches;
    if (!r.first) r.first = m;
  };
  const std::int64_t QL = ref.query_len;
  for (std::int64_t h = 0; h < ref.heads; ++h)
    for (std::int64_t row = 0; row < ref.tokens; ++row)
      for (std::int64_t j = 0; j < ref.slots; ++j) {
        const std::int64_t off = layout.offset(h, row, j);
        const std::int64_t i = row / QL;
        Coordinates at{i, row % QL, h, row, j, block_of_slot(j, ref.rank, ref.world),
                       ref.page[static_cast<std::size_t>(i * ref.slots + j)]};
        const float got = after[off];
        if (!ref.is_written(row, j)) {
          in_view[static_cast<std::size_t>(off)] = 1;
          continue;
        }
        in_view[static_cast<std::size_t>(off)] = 2;
        ++r.written;
        const std::size_t e = static_cast<std::size_t>(ref.index(h, row, j));
        const double exact = ref.exact[e], bound = ref.bound[e];
        if (std::isinf(exact)) {
          ++r.written_neg_inf;
          if (!(std::isinf(got) && got < 0)) record({MismatchKind::expected_neg_inf, at, off, exact, got, 0});
          continue;
        }
        ++r.written_finite;
        if (!std::isfinite(got)) {
          record({MismatchKind::lost_finite, at, off, exact, got, bound});
          continue;
        }
        const double err = std::fabs(static_cast<double>(got) - exact);
        const double ratio = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
        if (ratio > r.worst_ratio || r.written_finite == 1) {
          r.worst_ratio = std::fmax(r.worst_ratio, ratio);
          r.worst_at = at;
        }
        if (!(err <= bound)) record({MismatchKind::outside_bound, at, off, exact, got, bound});
      }
  for (std::int64_t off = 0; off < elements; ++off) {
    const std::uint8_t tag = in_view[static_cast<std::size_t>(off)];
    if (tag == 2) continue;
    ++r.unwritten_checked;
    if (bits(before[off]) == bits(after[off])) continue;
    Mismatch m{tag == 1 ? MismatchKind::unwritten_changed : MismatchKind::outside_view_changed, {}, off,
               before[off], after[off], 0};
    if (tag == 1 && !r.first) {  // coordinates of the first changed view element
      for (std::int64_t h = 0; h < ref.heads && m.at.row < 0; ++h)
        for (std::int64_t row = 0; row < ref.tokens && m.at.row < 0; ++row)
          for (std::int64_t j = 0; j < ref.slots; ++j)
            if (layout.offset(h, row, j) == off) {
              const std::int64_t i = row / QL;
              m.at = {i, row % QL, h, row, j, block_of_slot(j, ref.rank, ref.world), -1};
              break;
            }
    }
    record(m);
  }
  return r;
}

}  // namespace ctxscore
