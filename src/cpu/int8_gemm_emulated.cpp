// The f64 oracle of the int8 GEMM (src/backend/int8_gemm.h, Int8GemmHostKernels::emulated_f64):
// HOT's `emulate` setting dequantises both operands' levels to f64 and multiplies them with
// BLAS dgemm, then rounds the product to f32 once.
#include <cblas.h>

#include <vector>

#include "src/cpu/int8_gemm.h"

namespace lb::cpu {

namespace {
std::vector<double> dequantize_f64(const int8_t* q, int64_t rows, int64_t cols, const float* row_scale,
                                   float scale) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      v[r * cols + c] = static_cast<double>(q[r * cols + c]) * (row_scale ? row_scale[r] : scale);
  return v;
}
}  // namespace

void int8_gemm_emulated_f64(bool trans_a, int64_t M, int64_t N, int64_t K, const int8_t* A,
                            const float* a_row_scale, float a_scale, const int8_t* B, float b_scale, double alpha,
                            float* out) {
  const int64_t a_rows = trans_a ? K : M, lda = trans_a ? M : K;
  const auto a = dequantize_f64(A, a_rows, lda, a_row_scale, a_scale);
  const auto b = dequantize_f64(B, K, N, nullptr, b_scale);
  std::vector<double> c(static_cast<size_t>(M * N));
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, CblasNoTrans, static_cast<int>(M),
              static_cast<int>(N), static_cast<int>(K), alpha, a.data(), static_cast<int>(lda), b.data(),
              static_cast<int>(N), 0.0, c.data(), static_cast<int>(N));
  for (size_t i = 0; i < c.size(); ++i) out[i] = static_cast<float>(c[i]);
}

}  // namespace lb::cpu
