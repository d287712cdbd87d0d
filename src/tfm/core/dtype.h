// Element types and the bf16 <-> f32 conversions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace tfm::internal {

// i8: symmetric int8, only as the packed weights of int8 inference products (no arithmetic on
// i8 tensors).
enum class DType : uint8_t { f32, bf16, i32, i8 };

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::bf16:
      return 2;
    case DType::i8:
      return 1;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i8:
      return "i8";
  }
  return "?";
}

// bfloat16: the upper 16 bits of an IEEE f32.
struct bf16 {
  uint16_t bits = 0;
};

// Round to nearest, ties to even; NaN stays NaN.
inline bf16 float_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<uint16_t>((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<uint16_t>(u >> 16)};
}

inline float bf16_to_float(bf16 value) {
  uint32_t u = static_cast<uint32_t>(value.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::bf16;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}

}  // namespace tfm::internal
