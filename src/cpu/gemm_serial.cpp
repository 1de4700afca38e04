// gemm_serial: floats through our AVX-512 kernel (sgemm_avx512.h) where the CPU has it,
// or, under MatmulPrecision::BF16 (lb/core/precision.h), through the bf16 kernel
// (sgemm_bf16.h); everything else through OpenBLAS (configured single-threaded,
// blas_config.h).
#include "src/cpu/gemm_serial.h"

#include <cblas.h>

#include <vector>

#include "lb/core/dtype.h"
#include "lb/core/precision.h"
#include "src/cpu/blas_config.h"
#include "src/cpu/sgemm_avx512.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::cpu {

namespace {

// op(X) (rows x cols of the stored matrix, leading dimension ld) rounded to bf16 values into
// a dense scratch copy (ld = cols): the bf16 product on CPUs without AVX512-BF16.
const float* rounded_copy(const float* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& buf) {
  buf.resize(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) buf[i * cols + j] = bf16_to_f32(f32_to_bf16(x[i * ld + j]));
  return buf.data();
}

void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace

void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (matmul_precision() == MatmulPrecision::BF16 && k > 0) {
    if (sgemm_bf16_preferred()) {
      sgemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    thread_local std::vector<float> abuf, bbuf;
    const float* ar = rounded_copy(a, ta ? k : m, ta ? m : k, lda, abuf);
    const float* br = rounded_copy(b, tb ? n : k, tb ? k : n, ldb, bbuf);
    gemm_f32(ta, tb, m, n, k, alpha, ar, ta ? m : k, br, tb ? k : n, beta, c, ldc);
    return;
  }
  gemm_f32(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

namespace {

void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // Fewer than 16 columns leave most of our kernel's 48-column tile empty: OpenBLAS was
  // faster there (n = 8: 79 against 63 GFLOP/s; n = 16: 101 against 128).
  if (sgemm_avx512_available() && n >= 16) {
    sgemm_avx512(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace

void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace lb::cpu
