// Internal: the integer GEMM of one device (see backend.h) for HOT's quantised products:
// int8 operands, int32 sums, a dequantising f32 epilogue (src/cpu/int8_gemm.h's contract):
//   out[m, n] (+)= float(Σ_k op(A)[m, k] op(B)[k, n]) · (row_scale[m] · alpha)
// A, B int8 tensors read from element offsets a_offset / b_offset with leading dimensions
// lda / ldb (row-major, as stored), out f32 with leading dimension ldo; row_scale (M) f32 or
// undefined. Exact (the int32 sums) as long as every dot product fits in int32.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct Int8GemmKernels {
  void (*gemm_f32)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const Tensor& A, int64_t a_offset,
                   int64_t lda, const Tensor& B, int64_t b_offset, int64_t ldb, Tensor& out, int64_t ldo,
                   const Tensor& row_scale, float alpha, bool accumulate);
  const char* (*name)();  // the kernel that runs, for reports
};

// src/cpu/int8_gemm.cpp, cuda/int8_gemm.cu
LB_KERNEL_TABLES(Int8GemmKernels, int8_gemm_kernels, kCpuInt8Gemm, kCudaInt8Gemm, "int8 GEMM")

}  // namespace lb::backend
