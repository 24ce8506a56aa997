// The protocol's messages of a call (port_messages.hpp).
#include "port_messages.hpp"

#include <cstring>

#include "ctxscore/wire_format.hpp"

namespace ctxscore::harness::port_messages {

StTensor storage(StDType dtype, const void* data, std::size_t elements) {
  StTensor t;
  t.dtype = dtype;
  t.shape = {static_cast<std::int64_t>(elements)};
  t.bytes.resize(elements * st_dtype_size(dtype));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

// The `score`-shaped request of a call: storages and arguments.
SafeTensors call_message(const char* kind, const HostCase& host, OutMode mode, std::int64_t max_seq_len) {
  const Case& c = host.spec;
  SafeTensors st;
  st.tensors.emplace_back("idx_q", storage(StDType::bf16, host.q.data(), host.q.size()));
  st.tensors.emplace_back("index_cache", storage(StDType::bf16, host.cache.data(), host.cache.size()));
  st.tensors.emplace_back("block_table", storage(StDType::i32, host.table.data(), host.table.size()));
  st.tensors.emplace_back("seq_lens", storage(StDType::i32, c.seq_lens.data(), c.seq_lens.size()));
  auto& m = st.metadata;
  m[protocol::kMessage] = kind;
  m[protocol::shape_field("idx_q")] = protocol::join_ints({c.tokens(), c.heads, kHeadDim});
  m[protocol::strides_field("idx_q")] = protocol::join_ints({c.q_token_stride, c.q_head_stride, 1});
  m[protocol::shape_field("index_cache")] = protocol::join_ints({c.pages, kBlockTokens, kHeadDim});
  m[protocol::shape_field("block_table")] = protocol::join_ints({c.batch(), c.table_width});
  m[protocol::strides_field("block_table")] = protocol::join_ints({c.table_row_stride, 1});
  protocol::put_scalars(m, {max_seq_len, c.rank, c.world, c.query_len, c.sm_scale});
  if (mode != OutMode::absent) {
    st.tensors.emplace_back("out", storage(StDType::f32, host.out.data(), host.out.size()));
    m[protocol::shape_field("out")] = protocol::join_ints({c.heads, c.out_rows, mode == OutMode::too_small ? c.local() - 1 : c.out_slots});
    m[protocol::strides_field("out")] = protocol::join_ints({c.out_head_stride, c.out_row_stride, c.out_slot_stride});
  }
  if (c.geometry) {
    m["geometry_chunk"] = std::to_string(c.geometry->chunk);
    m["geometry_grid_y"] = std::to_string(c.geometry->grid_y);
    m["geometry_teams"] = std::to_string(c.geometry->teams);
    m["geometry_ring_pages"] = std::to_string(c.geometry->ring_pages);
  }
  return st;
}

StDType wire_dtype(DType d) {
  switch (d) {
    case DType::bf16: return StDType::bf16;
    case DType::f16: return StDType::f16;
    case DType::f32: return StDType::f32;
    case DType::i32: return StDType::i32;
    case DType::i64: return StDType::i64;
    case DType::u8: return StDType::u8;
    case DType::f8e4m3: break;
  }
  throw std::invalid_argument(std::string("a call in ") + dtype_name(d) + ", a dtype the port protocol has no name for");
}

RawTensor& call_tensor(RawCall& c, int k) {
  RawTensor* all[] = {&c.idx_q, &c.index_cache, &c.block_table, &c.seq_lens, &c.out};
  return *all[k];
}

// Any call, valid or not, as a `score` request: each storage in its own
// dtype, every view's shape and strides.
SafeTensors raw_message(RawCall& c) {
  SafeTensors st;
  auto& m = st.metadata;
  m[protocol::kMessage] = protocol::kind::score;
  for (int k = 0; k < 5; ++k) {
    RawTensor& t = call_tensor(c, k);
    StTensor s;
    s.dtype = wire_dtype(t.view.dtype);
    s.shape = {static_cast<std::int64_t>(t.bytes.size() / st_dtype_size(s.dtype))};
    s.bytes = t.bytes;
    st.tensors.emplace_back(kCallTensors[k], std::move(s));
    const std::vector<std::int64_t> shape(t.view.shape.begin(), t.view.shape.begin() + t.view.ndim);
    const std::vector<std::int64_t> strides(t.view.strides.begin(), t.view.strides.begin() + t.view.ndim);
    m[protocol::shape_field(kCallTensors[k])] = protocol::join_ints(shape);
    m[protocol::strides_field(kCallTensors[k])] = protocol::join_ints(strides);
  }
  protocol::put_scalars(m, {c.max_seq_len, c.rank, c.world, c.max_query_len, c.sm_scale});
  return st;
}


}  // namespace ctxscore::harness::port_messages
