// Non-owning typed views of the contract's five tensors. They describe host
// buffers, fixture buffers and device copies alike; build them from
// validated TensorRefs with views_of().
#pragma once

#include <Eigen/Core>
#include <cstdint>

#include "ctxscore/contract.hpp"
#include "ctxscore/tensor.hpp"

namespace ctxscore {

using bf16 = Eigen::bfloat16;

struct QueryView {  // [T, H, 128], D contiguous, free outer strides
  const bf16* data = nullptr;
  std::int64_t tokens = 0, heads = 0, token_stride = 0, head_stride = 0;
  const bf16* row(std::int64_t t, std::int64_t h) const { return data + t * token_stride + h * head_stride; }
};

struct CacheView {  // [P, 128, 128] contiguous; 64-bit page offsets
  const bf16* data = nullptr;
  std::int64_t pages = 0;
  const bf16* page(std::int64_t p) const { return data + p * kPageElems; }
};

struct TableView {  // [B, Wt], unit column stride, free row stride
  const std::int32_t* data = nullptr;
  std::int64_t rows = 0, width = 0, row_stride = 0;
  std::int32_t at(std::int64_t i, std::int64_t b) const { return data[i * row_stride + b]; }
};

struct LengthsView {  // [B] contiguous
  const std::int32_t* data = nullptr;
  std::int64_t batch = 0;
  std::int32_t at(std::int64_t i) const { return data[i]; }
};

struct ScoresView {  // [H, >=T, >=L] fp32, any strides
  float* data = nullptr;
  std::int64_t heads = 0, rows = 0, slots = 0;
  std::int64_t head_stride = 0, row_stride = 0, slot_stride = 0;
  std::int64_t offset(std::int64_t h, std::int64_t r, std::int64_t j) const {
    return h * head_stride + r * row_stride + j * slot_stride;
  }
  float& at(std::int64_t h, std::int64_t r, std::int64_t j) const { return data[offset(h, r, j)]; }
  // Elements a buffer needs to hold every element of this view.
  std::int64_t extent() const {
    if (heads == 0 || rows == 0 || slots == 0) return 0;
    return offset(heads - 1, rows - 1, slots - 1) + 1;
  }
};

struct InputViews {
  QueryView q;
  CacheView cache;
  TableView table;
  LengthsView lens;
};

struct ScoreArgs;
InputViews views_of(const ScoreArgs& args);
ScoresView scores_view_of(const TensorRef& out);

}  // namespace ctxscore
