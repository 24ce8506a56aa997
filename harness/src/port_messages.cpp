// The protocol's messages of a call (port_messages.hpp).
#include "port_messages.hpp"

#include <cstring>

#include "ctxscore/wire_format.hpp"

namespace ctxscore::harness::port_messages {

std::string join(const std::vector<std::int64_t>& v) {
  std::string s;
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? "," : "") + std::to_string(v[k]);
  return s;
}

StTensor storage(StDType dtype, const void* data, std::size_t elements) {
  StTensor t;
  t.dtype = dtype;
  t.shape = {static_cast<std::int64_t>(elements)};
  t.bytes.resize(elements * st_dtype_size(dtype));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

// The call's scalar arguments, as every request names them (PROTOCOL.md).
void put_scalar_arguments(std::map<std::string, std::string>& m, std::int64_t max_seq_len, std::int64_t rank, std::int64_t world,
                          std::int64_t max_query_len, double sm_scale) {
  m["max_seq_len"] = std::to_string(max_seq_len);
  m["rank"] = std::to_string(rank);
  m["world_size"] = std::to_string(world);
  m["max_query_len"] = std::to_string(max_query_len);
  m["sm_scale"] = decimal(sm_scale);
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
  m["message"] = kind;
  m["idx_q_shape"] = join({c.tokens(), c.heads, kHeadDim});
  m["idx_q_strides"] = join({c.q_token_stride, c.q_head_stride, 1});
  m["index_cache_shape"] = join({c.pages, kBlockTokens, kHeadDim});
  m["block_table_shape"] = join({c.batch(), c.table_width});
  m["block_table_strides"] = join({c.table_row_stride, 1});
  put_scalar_arguments(m, max_seq_len, c.rank, c.world, c.query_len, c.sm_scale);
  if (mode != OutMode::absent) {
    st.tensors.emplace_back("out", storage(StDType::f32, host.out.data(), host.out.size()));
    m["out_shape"] = join({c.heads, c.out_rows, mode == OutMode::too_small ? c.local() - 1 : c.out_slots});
    m["out_strides"] = join({c.out_head_stride, c.out_row_stride, c.out_slot_stride});
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
  m["message"] = "score";
  for (int k = 0; k < 5; ++k) {
    RawTensor& t = call_tensor(c, k);
    StTensor s;
    s.dtype = wire_dtype(t.view.dtype);
    s.shape = {static_cast<std::int64_t>(t.bytes.size() / st_dtype_size(s.dtype))};
    s.bytes = t.bytes;
    st.tensors.emplace_back(kCallTensors[k], std::move(s));
    const std::vector<std::int64_t> shape(t.view.shape.begin(), t.view.shape.begin() + t.view.ndim);
    const std::vector<std::int64_t> strides(t.view.strides.begin(), t.view.strides.begin() + t.view.ndim);
    m[std::string(kCallTensors[k]) + "_shape"] = join(shape);
    m[std::string(kCallTensors[k]) + "_strides"] = join(strides);
  }
  put_scalar_arguments(m, c.max_seq_len, c.rank, c.world, c.max_query_len, c.sm_scale);
  return st;
}


}  // namespace ctxscore::harness::port_messages
