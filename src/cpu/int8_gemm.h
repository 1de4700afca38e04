// Integer GEMM on the CPU for the quantised backward passes (HOT): int8 operands, int32
// accumulation. C = op(A) op(B), with
//   A: (M, K) row-major, leading dimension lda   (trans_a: stored as (K, M))
//   B: (K, N) row-major, leading dimension ldb   (trans_b: stored as (N, K))
// The result is exact whenever every true dot product fits in int32 (|Σ a·b| < 2^31): the
// kernel accumulates modulo 2^32, so intermediate wrap-around cancels. For 8-bit × 8-bit
// levels (±127) that holds for K ≤ 133,144; callers split longer contractions.
//
// On CPUs with AVX-512 VNNI the kernel is ours: vpdpbusd multiplies u8 by s8, so A is packed
// as a + 128 (a byte XOR) and the surplus 128·Σ_k b[k, n] is subtracted from the start value
// of each column (computed from the packed B with vpdpbusd against ones). Without VNNI, the
// AVX2 kernel of int8_gemm_avx2.h (int16 pairs through vpmaddwd) runs where the CPU has
// AVX2, a portable loop elsewhere (same results, slow). See int8_gemm.cpp for the blocking. Where
// the CPU has AMX-INT8 (and LEANBACK_ISA allows amx) the tile kernel of amx_gemm.h runs instead.
#pragma once
#include <cstdint>

namespace lb::cpu {

// C (M, N) int32 with leading dimension ldc. accumulate: C += instead of C =.
void int8_gemm_s32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, int32_t* C, int64_t ldc,
                   bool accumulate = false);

// Dequantising epilogue: out[m, n] (+)= float(Σ_k a·b) · (row_scale[m] · alpha) · col_scale[n],
// where row_scale and col_scale may be null (then 1). out is f32 (M, N) with leading dimension
// ldo. The int32 sum is converted to float once, then multiplied in float in that order.
void int8_gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, float* out, int64_t ldo,
                   const float* row_scale, float alpha, bool accumulate = false,
                   const float* col_scale = nullptr);

// The f64 oracle (src/backend/int8_gemm.h's Int8GemmHostKernels::emulated_f64), in
// int8_gemm_emulated.cpp: BLAS dgemm over the dequantised levels.
void int8_gemm_emulated_f64(bool trans_a, int64_t M, int64_t N, int64_t K, const int8_t* A,
                            const float* a_row_scale, float a_scale, const int8_t* B, float b_scale, double alpha,
                            float* out);

// Which kernel runs: "amx-int8" (AMX tiles, amx_gemm.h), "avx512-vnni", "avx2" or "portable".
const char* int8_gemm_kernel();

// The portable loop, always compiled (the exactness tests compare the two).
void int8_gemm_s32_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            const int8_t* A, int64_t lda, const int8_t* B, int64_t ldb,
                            int32_t* C, int64_t ldc, bool accumulate = false);

}  // namespace lb::cpu
