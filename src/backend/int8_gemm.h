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

// The CPU's side entries: the GEMM on host pointers for loops that run per image on the CPU
// (HOT's conv path; src/cpu/int8_gemm.h's int8_gemm_f32, with a per-column scale too:
// out[m, n] (+)= float(Σ_k a·b) · (row_scale[m] · alpha) · col_scale[n], either scale
// nullable), and the f64 oracle HOT's `emulate` setting runs instead of the integer GEMM:
// out (M, N) f32 = float(alpha · op(Â) B̂) computed in f64 (BLAS dgemm), where Â is A's levels
// as stored ((M, K), or (K, M) when trans_a) times a_row_scale[row] when defined, else
// a_scale, and B̂ (K, N) = B's levels times b_scale (contiguous, as out (M, N)).
struct Int8GemmHostKernels {
  void (*gemm_f32)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                   const int8_t* B, int64_t ldb, float* out, int64_t ldo, const float* row_scale, float alpha,
                   bool accumulate, const float* col_scale);
  void (*emulated_f64)(bool trans_a, int64_t M, int64_t N, int64_t K, const int8_t* A, const float* a_row_scale,
                       float a_scale, const int8_t* B, float b_scale, double alpha, float* out);
};
// src/cpu/int8_gemm.cpp, src/cpu/int8_gemm_emulated.cpp
extern const Int8GemmHostKernels kCpuInt8GemmHost;

}  // namespace lb::backend
