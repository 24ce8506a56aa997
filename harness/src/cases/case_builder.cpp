#include "ctxscore/harness/case_builder.hpp"

#include <stdexcept>

namespace ctxscore::harness {

TableRule cycled_pages(std::int64_t step) {
  return [step](const Case& c, std::int64_t i, std::int64_t b) {
    const std::int64_t e = i * c.table_width + b;
    return static_cast<std::int32_t>((e * step + 1) % c.pages);
  };
}

TableRule every_entry(std::int32_t id) {
  return [id](const Case&, std::int64_t, std::int64_t) { return id; };
}

TableRule distinct_shard_pages() {
  return [](const Case& c, std::int64_t i, std::int64_t b) {
    return static_cast<std::int32_t>(i * c.local() + min64(b / c.world, c.local() - 1));
  };
}

CaseBuilder::CaseBuilder(std::string name) { c_.name = std::move(name); }
CaseBuilder& CaseBuilder::seed(std::uint64_t v) { c_.seed = v; return *this; }
CaseBuilder& CaseBuilder::zero_queries() { c_.zero_queries = true; return *this; }
CaseBuilder& CaseBuilder::heads(std::int64_t v) { c_.heads = v; return *this; }
CaseBuilder& CaseBuilder::query_len(std::int64_t v) { c_.query_len = v; return *this; }
CaseBuilder& CaseBuilder::world(std::int64_t v) { c_.world = v; return *this; }
CaseBuilder& CaseBuilder::rank(std::int64_t v) { c_.rank = v; return *this; }
CaseBuilder& CaseBuilder::bound(std::int64_t v) { c_.max_seq_len = v; return *this; }
CaseBuilder& CaseBuilder::pages(std::int64_t v) { c_.pages = v; return *this; }
CaseBuilder& CaseBuilder::sm_scale(double v) { c_.sm_scale = v; return *this; }
CaseBuilder& CaseBuilder::lens(std::vector<std::int32_t> v) { c_.seq_lens = std::move(v); return *this; }
CaseBuilder& CaseBuilder::table(std::vector<std::int32_t> ids, std::int64_t width) {
  ids_ = std::move(ids);
  width_ = width;
  return *this;
}
CaseBuilder& CaseBuilder::table(TableRule rule, std::int64_t extra_width) {
  rule_ = std::move(rule);
  extra_width_ = extra_width;
  return *this;
}
CaseBuilder& CaseBuilder::table_row_stride(std::int64_t v) { row_stride_ = v; return *this; }
CaseBuilder& CaseBuilder::query_strides(std::int64_t token_stride, std::int64_t head_stride) {
  c_.q_token_stride = token_stride;
  c_.q_head_stride = head_stride;
  return *this;
}
CaseBuilder& CaseBuilder::out(std::int64_t rows, std::int64_t slots, std::int64_t head_stride, std::int64_t row_stride,
                              std::int64_t slot_stride) {
  c_.out_rows = rows;
  c_.out_slots = slots;
  c_.out_head_stride = head_stride;
  c_.out_row_stride = row_stride;
  c_.out_slot_stride = slot_stride;
  return *this;
}
CaseBuilder& CaseBuilder::geometry(GeometryOverride g) { c_.geometry = g; return *this; }
CaseBuilder& CaseBuilder::sentinel(float v) { c_.sentinel = v; return *this; }

Case CaseBuilder::build() const {
  Case c = c_;
  const std::int64_t B = c.batch();
  if (ids_) {
    c.table_width = width_ > 0 ? width_ : c.global();
    if (static_cast<std::int64_t>(ids_->size()) != B * c.table_width)
      throw std::invalid_argument("CaseBuilder(" + c.name + "): table has " + std::to_string(ids_->size()) +
                                  " ids, expected batch × width = " + std::to_string(B) + " × " +
                                  std::to_string(c.table_width));
    c.block_table = *ids_;
  } else {
    c.table_width = c.global() + extra_width_;
    const TableRule rule = rule_ ? rule_ : cycled_pages(3);
    c.block_table.resize(static_cast<std::size_t>(B * c.table_width));
    for (std::int64_t i = 0; i < B; ++i)
      for (std::int64_t b = 0; b < c.table_width; ++b)
        c.table_entry(i, b) = rule(c, i, b);
  }
  c.table_row_stride = row_stride_ > 0 ? row_stride_ : c.table_width;
  return c.resolved();
}

}  // namespace ctxscore::harness
