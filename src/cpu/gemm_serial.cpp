// gemm_serial: floats through our AVX-512 kernel (sgemm_avx512.h) where the build has it,
// everything else through OpenBLAS (configured single-threaded, blas_config.h).
#include "src/cpu/gemm_serial.h"

#include <cblas.h>

#include "src/cpu/blas_config.h"
#include "src/cpu/sgemm_avx512.h"

namespace lb::cpu {

void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
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

void gemm_serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                 int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

}  // namespace lb::cpu
