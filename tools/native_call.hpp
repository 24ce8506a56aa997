// A native port call (native_port.h) as the reference's ScoreArgs: what a
// C++ port library built on this project hands its scorer.
#pragma once

#include "ctxscore/validate.hpp"
#include "native_port.h"

namespace ctxscore {

inline TensorRef tensor_of(const ctxscore_tensor& t, DType dtype, Device device) {
  TensorRef r;
  r.data = t.data;
  r.dtype = dtype;
  r.device = device;
  r.ndim = t.ndim;
  for (int d = 0; d < t.ndim; ++d) {
    r.shape[d] = t.shape[d];
    r.strides[d] = t.strides[d];
  }
  return r;
}

inline ScoreArgs score_args_of(const ctxscore_call& call, Device device) {
  ScoreArgs a;
  a.idx_q = tensor_of(call.idx_q, DType::bf16, device);
  a.index_cache = tensor_of(call.index_cache, DType::bf16, device);
  a.block_table = tensor_of(call.block_table, DType::i32, device);
  a.seq_lens = tensor_of(call.seq_lens, DType::i32, device);
  a.max_seq_len = call.max_seq_len;
  a.rank = call.rank;
  a.world = call.world_size;
  a.max_query_len = call.max_query_len;
  a.sm_scale = call.sm_scale;
  if (call.has_out) a.out = tensor_of(call.out, DType::f32, device);
  return a;
}

}  // namespace ctxscore
