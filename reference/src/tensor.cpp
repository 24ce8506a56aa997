#include "ctxscore/tensor.hpp"

#include <sstream>

namespace ctxscore {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::f32: return "f32";
    case DType::f8e4m3: return "f8e4m3";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  return "?";
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::bf16: case DType::f16: return 2;
    case DType::f32: case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::f8e4m3: case DType::u8: return 1;
  }
  return 0;
}

std::string Device::str() const {
  return (kind == Kind::host ? "host:" : "gpu:") + std::to_string(index);
}

bool TensorRef::contiguous() const {
  std::int64_t expect = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && strides[d] != expect) return false;
    expect *= shape[d];
  }
  return true;
}

std::int64_t TensorRef::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

static std::string join(const std::array<std::int64_t, 3>& v, int n, char open, char close) {
  std::ostringstream s;
  s << open;
  for (int d = 0; d < n; ++d) s << (d ? ", " : "") << v[d];
  s << close;
  return s.str();
}
std::string TensorRef::shape_str() const { return join(shape, ndim, '[', ']'); }
std::string TensorRef::strides_str() const { return join(strides, ndim, '(', ')'); }

TensorRef make_strided(void* data, DType dtype, Device device,
                       std::initializer_list<std::int64_t> shape,
                       std::initializer_list<std::int64_t> strides) {
  TensorRef t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = static_cast<int>(shape.size());
  int d = 0;
  for (auto s : shape) t.shape[d++] = s;
  d = 0;
  for (auto s : strides) t.strides[d++] = s;
  return t;
}

TensorRef make_tensor(void* data, DType dtype, Device device,
                      std::initializer_list<std::int64_t> shape) {
  TensorRef t = make_strided(data, dtype, device, shape, {});
  std::int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.strides[d] = s;
    s *= t.shape[d];
  }
  return t;
}

}  // namespace ctxscore
