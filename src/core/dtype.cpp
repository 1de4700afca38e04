// DType names, sizes and half-precision conversions.
#include "lb/core/dtype.h"

#include <cmath>

#include "lb/core/error.h"

namespace lb {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F64: return 8;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::I8: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
    case DType::Bool: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
    case DType::I8: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::Bool: return "bool";
  }
  return "?";
}

DType dtype_from_name(const std::string& n) {
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I8, DType::I32,
                  DType::I64, DType::U8, DType::Bool})
    if (n == dtype_name(t)) return t;
  LB_FAIL("unknown dtype '", n, "'; valid: f32 f64 bf16 f16 i8 i32 i64 u8 bool");
}

bool dtype_is_floating(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::BF16 || t == DType::F16;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | (absx > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(e);  // 14 + (127-e) - 1 ... shift to 10-bit field
    const uint32_t shifted = m >> (shift);
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = shifted;
    if (rem > half || (rem == half && (shifted & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((absx - 0x38000000u) >> 13);
  const uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1f;
  const uint32_t m = h & 0x3ff;
  float f;
  if (e == 0) {
    f = std::ldexp(static_cast<float>(m), -24);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u |= sign;
    std::memcpy(&f, &u, 4);
    return f;
  }
  uint32_t u;
  if (e == 31) u = sign | 0x7f800000u | (m << 13);
  else u = sign | ((e + 112) << 23) | (m << 13);
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace lb
