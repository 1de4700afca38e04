// CPU GEMM kernel on strided, batched tensors (OpenBLAS cblas_?gemm), shared by matmul and
// linear. No autograd here: the ops record their own nodes.
//
// Every operand is a stack of matrices (..., rows, cols). A matrix whose last two dims are
// contiguous in either orientation (row- or column-major, any leading dimension) is passed to
// BLAS as is, with the transpose flag flipped for column-major: transposed views never copy.
#pragma once
#include "lb/core/tensor.h"

namespace lb::cpu {

// c[i] = op(a[i]) op(b[i])      (accumulate = false)
// c[i] += op(a[i]) op(b[i])     (accumulate = true)
// over the batch index i of shape `batch`. a, b and c have shapes (..., R, C) whose leading
// dims broadcast to `batch`; op(x) is x or its transpose (trans_x). c must be row-major in
// its last two dims (contiguous rows). When c has fewer batch dims than `batch` (or size-1
// ones), the products over the broadcast dims are summed into c: this is how the gradient
// of a broadcast operand is reduced without a temporary.
//
// Batches collapse into one GEMM where the layout allows it (no copies): a batched a with a
// shared b folds into the rows (M·batch, K) x (K, N); a fully reduced c whose a and b stack
// along the inner dim folds into K (the weight-gradient case g_yᵀ x).
// a, b, c: same float dtype, CPU; shapes must already be checked by the caller. Or, for a
// product kept for backward in bf16 (autograd/saved_operand.h), a and/or b BF16 with c F32:
// the bf16 kernel reads their values as they are when gemm_reads_bf16(), else they are
// widened to f32 first (exactly: the same product either way).
void gemm_into(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               const Shape& batch, bool accumulate);

// Row-major C = alpha op(A) op(B) + beta C on raw pointers (cblas argument order, M x N
// result, K inner). OpenBLAS runs single-threaded (blas_config.h); large products are split
// here into one block of C per OpenMP thread (rows when M >= N, else columns), unless the
// caller is already inside a parallel region. Use this instead of cblas_?gemm directly.
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc);

// True when f32 products run on the bf16 kernel (bf16 precision, sgemm_bf16_preferred()), so
// bf16 operands are read as they are; otherwise gemm_into widens them.
bool gemm_reads_bf16();

// f32 products with an operand given as bf16 values (uint16_t, e.g. a copy kept for
// backward): only when gemm_reads_bf16().
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const uint16_t* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

// FLOPs of one matmul (2·M·N·K per batch element), for benchmark reports.
inline double gemm_flops(int64_t batch, int64_t m, int64_t n, int64_t k) {
  return 2.0 * static_cast<double>(batch) * static_cast<double>(m) * static_cast<double>(n) *
         static_cast<double>(k);
}

}  // namespace lb::cpu
