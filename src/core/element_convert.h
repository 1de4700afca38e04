// Internal: one element of any dtype read as / written from a double (Tensor::item,
// to_double_vector, the converting paths of the CPU and CUDA copy kernels).
#pragma once
#include <cstdint>

#include "lb/core/dtype.h"
#include "lb/core/host_device.h"
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

namespace lb::detail {

LB_HD inline double load_as_double(const void* base, int64_t i, DType t) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(base)[i];
    case DType::F64: return static_cast<const double*>(base)[i];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(base)[i]);
    case DType::F16:
#if defined(__CUDA_ARCH__)
      return __half2float(static_cast<const __half*>(base)[i]);
#else
      return f16_to_f32(static_cast<const uint16_t*>(base)[i]);
#endif
    case DType::I8: return static_cast<const int8_t*>(base)[i];
    case DType::I32: return static_cast<const int32_t*>(base)[i];
    case DType::I64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DType::U8: return static_cast<const uint8_t*>(base)[i];
    case DType::Bool: return static_cast<const uint8_t*>(base)[i] ? 1.0 : 0.0;
  }
  return 0;
}
LB_HD inline void store_from_double(void* base, int64_t i, DType t, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DType::F64: static_cast<double*>(base)[i] = v; break;
    case DType::BF16: static_cast<uint16_t*>(base)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::F16:
#if defined(__CUDA_ARCH__)
      static_cast<__half*>(base)[i] = __float2half_rn(static_cast<float>(v));
#else
      static_cast<uint16_t*>(base)[i] = f32_to_f16(static_cast<float>(v));
#endif
      break;
    case DType::I8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DType::I32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DType::I64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DType::U8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DType::Bool: static_cast<uint8_t*>(base)[i] = v != 0.0; break;
  }
}

}  // namespace lb::detail
