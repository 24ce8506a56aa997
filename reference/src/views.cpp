#include "ctxscore/views.hpp"

#include "ctxscore/validate.hpp"

namespace ctxscore {

InputViews views_of(const ScoreArgs& a) {
  InputViews v;
  v.q = {static_cast<const bf16*>(a.idx_q.data), a.idx_q.shape[0], a.idx_q.shape[1], a.idx_q.strides[0],
         a.idx_q.strides[1]};
  v.cache = {static_cast<const bf16*>(a.index_cache.data), a.index_cache.shape[0]};
  v.table = {static_cast<const std::int32_t*>(a.block_table.data), a.block_table.shape[0],
             a.block_table.shape[1], a.block_table.strides[0]};
  v.lens = {static_cast<const std::int32_t*>(a.seq_lens.data), a.seq_lens.shape[0]};
  return v;
}

ScoresView scores_view_of(const TensorRef& o) {
  return {static_cast<float*>(o.data), o.shape[0], o.shape[1], o.shape[2],
          o.strides[0], o.strides[1], o.strides[2]};
}

}  // namespace ctxscore
