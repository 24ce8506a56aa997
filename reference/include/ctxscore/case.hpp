// One test case as a single printable value: what generators yield, fixtures
// store, and the reference, kernel and benchmark take. Contents (queries and
// cache) are a pure function of the seed, so the line replays the case.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "ctxscore/contents.hpp"
#include "ctxscore/validate.hpp"
#include "ctxscore/views.hpp"

namespace ctxscore {

struct Case {
  std::string name = "random";  // the named case or class it was drawn as (a fixture's case_class)
  std::uint64_t seed = 0;        // query and cache contents
  std::int64_t heads = 1, query_len = 1, world = 1, rank = 0;
  std::int64_t max_seq_len = 128;  // the capture-stable bound S
  std::int64_t pages = 1;
  double sm_scale = 0.08838834764831845;  // 1/sqrt(128)
  std::vector<std::int32_t> seq_lens;     // B
  std::int64_t table_width = 1;           // Wt >= G
  std::int64_t table_row_stride = 1;      // >= Wt
  std::vector<std::int32_t> block_table;  // B × Wt, row-major, dense
  std::int64_t q_token_stride = 0, q_head_stride = 0;  // 0: packed
  // out is [heads, out_rows, out_slots] with the given strides; 0: packed [H, T, L].
  std::int64_t out_rows = 0, out_slots = 0;
  std::int64_t out_head_stride = 0, out_row_stride = 0, out_slot_stride = 0;
  std::optional<GeometryOverride> geometry;  // forced chunking (kernel only)
  float sentinel = -12345.0f;                // prefill of out
  bool zero_queries = false;                 // every query element 0 (every score ties); else from the seed

  std::int64_t batch() const { return static_cast<std::int64_t>(seq_lens.size()); }
  std::int64_t tokens() const { return batch() * query_len; }
  std::int64_t global() const { return global_blocks(max_seq_len); }
  std::int64_t local() const { return local_slots(global(), world); }
  // The table's page id for block b of request i.
  std::int32_t table_entry(std::int64_t i, std::int64_t b) const {
    return block_table[static_cast<std::size_t>(i * table_width + b)];
  }
  std::int32_t& table_entry(std::int64_t i, std::int64_t b) {
    return block_table[static_cast<std::size_t>(i * table_width + b)];
  }

  // Packed defaults filled in: every stride and out dimension explicit.
  Case resolved() const;
  // The same case with out packed [H, T, L] (the out fields back to 0).
  Case with_packed_out() const;
  // The same call unsharded: world 1, rank 0, the launcher's own geometry,
  // out packed; resolved.
  Case unsharded() const;
  std::string str() const;  // one line
};

void showValue(const Case& c, std::ostream& os);  // RapidCheck's printer

// The case's buffers on the host: padding of the query buffer holds NaN
// (a stride bug reads it), table padding holds random page ids, out holds
// the sentinel everywhere.
struct HostCase {
  Case spec;  // resolved
  std::vector<bf16> q, cache;
  std::vector<std::int32_t> table, lens;
  std::vector<float> out;
  ScoreArgs args(Device device = {});  // host TensorRefs over these buffers
  ScoresView out_layout() const;       // offsets into `out`
};
HostCase materialize(const Case& c);
// The same layout around given contents: dense queries [T, H, 128] and the
// cache [P, 128, 128] (what a fixture stores).
HostCase lay_out(const Case& c, const std::vector<bf16>& q_dense, std::vector<bf16> cache);

}  // namespace ctxscore
