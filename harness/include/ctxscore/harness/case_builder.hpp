// Builds a Case from named fields, one per line of a definition, so that a
// case reads as what it is: `CaseBuilder("x").heads(4).world(4).lens({...})`.
// The block table is given as explicit rows or as a rule evaluated once the
// width is known; everything left unset takes the packed default.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ctxscore/case.hpp"

namespace ctxscore::harness {

// Page id of (request, logical block) for a case whose other fields are set.
using TableRule = std::function<std::int32_t(const Case& c, std::int64_t request, std::int64_t block)>;

// Ids cycling over the pages: entry e of the dense table holds (e·step + 1) mod P.
TableRule cycled_pages(std::int64_t step);
// Every entry the same id (in range or not).
TableRule every_entry(std::int32_t id);
// Each (request, local slot) of the case's own shard gets a page of its own,
// request-major: the benchmark's layout, where no page is read twice.
TableRule distinct_shard_pages();

class CaseBuilder {
 public:
  explicit CaseBuilder(std::string name);
  CaseBuilder& seed(std::uint64_t v);
  CaseBuilder& zero_queries();  // every query element 0: every score ties
  CaseBuilder& heads(std::int64_t v);
  CaseBuilder& query_len(std::int64_t v);
  CaseBuilder& world(std::int64_t v);
  CaseBuilder& rank(std::int64_t v);
  CaseBuilder& bound(std::int64_t max_seq_len);
  CaseBuilder& pages(std::int64_t v);
  CaseBuilder& sm_scale(double v);
  CaseBuilder& lens(std::vector<std::int32_t> v);
  // Explicit dense rows of `width` ids (width 0: G).
  CaseBuilder& table(std::vector<std::int32_t> ids, std::int64_t width = 0);
  // A rule over `G + extra_width` columns.
  CaseBuilder& table(TableRule rule, std::int64_t extra_width = 0);
  CaseBuilder& table_row_stride(std::int64_t v);
  CaseBuilder& query_strides(std::int64_t token_stride, std::int64_t head_stride);
  // The out allocation [H, rows, slots] with these element strides.
  CaseBuilder& out(std::int64_t rows, std::int64_t slots, std::int64_t head_stride, std::int64_t row_stride,
                   std::int64_t slot_stride);
  CaseBuilder& geometry(GeometryOverride g);
  CaseBuilder& sentinel(float v);
  // The case, resolved (every stride and out dimension explicit).
  Case build() const;

 private:
  Case c_;
  std::optional<std::vector<std::int32_t>> ids_;
  std::int64_t width_ = 0;
  TableRule rule_;
  std::int64_t extra_width_ = 0;
  std::int64_t row_stride_ = 0;
};

}  // namespace ctxscore::harness
