// Element types. Compute kernels exist for f32/f64 (f64 for gradient checks); the others
// are storage types (bf16/f16 for mixed precision, i8 for quantized tensors, i32/i64 for
// indices, u8/bool for masks and images), convertible with Tensor::to(DType).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "lb/core/host_device.h"

namespace lb {

enum class DType : uint8_t { F32, F64, BF16, F16, I8, I32, I64, U8, Bool };

size_t dtype_size(DType t);
const char* dtype_name(DType t);          // "f32", "bf16", ...
DType dtype_from_name(const std::string& name);  // throws on unknown
bool dtype_is_floating(DType t);

// bf16: upper 16 bits of an f32, round-to-nearest-even on conversion.
LB_HD inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
LB_HD inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_f16(float f);   // IEEE half, round-to-nearest-even
float f16_to_f32(uint16_t h);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };
template <> struct DTypeOf<bool> { static constexpr DType value = DType::Bool; };

}  // namespace lb
