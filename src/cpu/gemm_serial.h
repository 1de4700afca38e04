// Single-threaded row-major GEMM on raw pointers: C = alpha·op(A)·op(B) +
// beta·C (cblas argument order, M x N result, K inner). The one place every
// float/double product of the CPU backend goes through (cpu::gemm splits large
// products over threads and calls this per block; conv2d calls it per chunk
// from its own OpenMP threads). Safe to call concurrently from several threads.
// beta = 0 never reads C (NaN in C does not propagate).
#pragma once
#include <cstdint>

namespace lb::cpu {

void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc);
void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc);

} // namespace lb::cpu
