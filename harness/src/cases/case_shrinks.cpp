#include "ctxscore/harness/case_shrinks.hpp"

#include <algorithm>

namespace ctxscore::harness {

namespace {

constexpr double kUpstreamScale = 0.08838834764831845;

bool packed(const Case& c) {
  const Case p = c.with_packed_out().resolved();
  return c.q_token_stride == c.heads * kHeadDim && c.q_head_stride == kHeadDim && c.table_row_stride == c.table_width &&
         c.out_rows == p.out_rows && c.out_slots == p.out_slots && c.out_head_stride == p.out_head_stride &&
         c.out_row_stride == p.out_row_stride && c.out_slot_stride == p.out_slot_stride;
}

// Packed queries and out, so that a change of T, H or L stays a valid layout.
Case repacked(Case c) {
  c.q_token_stride = c.q_head_stride = 0;
  return c.with_packed_out();
}

// The requests `keep` of `c`, in order, with their table rows.
Case with_requests(const Case& c, const std::vector<std::int64_t>& keep) {
  Case d = c;
  d.seq_lens.clear();
  d.block_table.clear();
  for (std::int64_t i : keep) {
    d.seq_lens.push_back(c.seq_lens[static_cast<std::size_t>(i)]);
    for (std::int64_t b = 0; b < c.table_width; ++b) d.block_table.push_back(c.table_entry(i, b));
  }
  if (d.q_head_stride > d.q_token_stride || d.out_rows > 0) d = repacked(d);
  return d;
}

}  // namespace

std::vector<Case> smaller_cases(const Case& c) {
  std::vector<Case> out;
  const auto add = [&out](const Case& d) { out.push_back(d.resolved()); };
  const std::int64_t B = c.batch();
  std::vector<std::int64_t> all(static_cast<std::size_t>(B));
  for (std::int64_t i = 0; i < B; ++i) all[static_cast<std::size_t>(i)] = i;
  if (B > 1) {  // halves first, then one request fewer
    add(with_requests(c, std::vector<std::int64_t>(all.begin(), all.begin() + B / 2)));
    add(with_requests(c, std::vector<std::int64_t>(all.begin() + B / 2, all.end())));
    for (std::int64_t i = 0; i < B; ++i) {
      std::vector<std::int64_t> keep = all;
      keep.erase(keep.begin() + i);
      add(with_requests(c, keep));
    }
  }
  if (c.heads > 1) {
    Case d = repacked(c);
    d.heads = 1;
    add(d);
  }
  if (c.query_len > 1) {
    Case d = repacked(c);
    d.query_len = 1;
    add(d);
  }
  if (c.world > 1) {
    Case d = repacked(c);
    d.world = 1;
    d.rank = 0;
    d.geometry.reset();
    add(d);
  }
  if (c.rank > 0) {
    Case d = repacked(c);
    d.rank = 0;
    d.geometry.reset();
    add(d);
  }
  if (c.geometry) {
    Case d = c;
    d.geometry.reset();
    add(d);
  }
  if (!packed(c) || c.table_width > c.global()) {
    Case d = repacked(c);
    d.block_table.clear();
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t b = 0; b < c.global(); ++b) d.block_table.push_back(c.table_entry(i, b));
    d.table_width = d.table_row_stride = c.global();
    add(d);
  }
  std::int64_t longest = 1;
  for (std::int32_t len : c.seq_lens) longest = std::max<std::int64_t>(longest, len);
  if (longest < c.max_seq_len) {  // a smaller bound: fewer blocks, a narrower table suffices
    Case d = repacked(c);
    d.max_seq_len = longest;
    d.geometry.reset();
    add(d);
  }
  if (c.sm_scale != kUpstreamScale) {
    Case d = c;
    d.sm_scale = kUpstreamScale;
    add(d);
  }
  for (std::size_t i = 0; i < c.seq_lens.size(); ++i) {
    const std::int32_t len = c.seq_lens[i];
    for (const std::int64_t shorter : {std::int64_t{0}, std::int64_t{len} / 2, std::int64_t{len} - 1}) {
      if (len == 0 || shorter == len || (len > 0 && shorter < 0) || (len < 0 && shorter < len)) continue;
      Case d = c;
      d.seq_lens[i] = static_cast<std::int32_t>(shorter);
      add(d);
    }
  }
  return out;
}

}  // namespace ctxscore::harness
