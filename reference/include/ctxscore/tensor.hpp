// A tensor as the operator receives it: pointer, dtype, device, shape and
// strides (in elements). The validator checks the contract's layout clauses
// on these, exactly as upstream checks its torch tensors.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ctxscore {

enum class DType : std::uint8_t { bf16, f16, f32, f8e4m3, i32, i64, u8 };
const char* dtype_name(DType d);
std::size_t dtype_size(DType d);

struct Device {
  enum class Kind : std::uint8_t { host, gpu };
  Kind kind = Kind::host;
  int index = 0;
  friend bool operator==(const Device& a, const Device& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
  std::string str() const;
};

struct TensorRef {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device;
  int ndim = 0;
  std::array<std::int64_t, 3> shape{};
  std::array<std::int64_t, 3> strides{};

  bool contiguous() const;
  std::int64_t numel() const;
  std::string shape_str() const;    // "[2, 3, 128]"
  std::string strides_str() const;  // "(384, 128, 1)"
};

// Row-major contiguous strides for a shape.
TensorRef make_tensor(void* data, DType dtype, Device device, std::initializer_list<std::int64_t> shape);
TensorRef make_strided(void* data, DType dtype, Device device,
                       std::initializer_list<std::int64_t> shape,
                       std::initializer_list<std::int64_t> strides);

}  // namespace ctxscore
