// cpu::gemm (raw pointers, split over OpenMP threads by output blocks) and the batched
// gemm_into paths large enough to run threaded: values against naive double loops for every
// transpose combination, row and column splits, ragged block edges, alpha/beta, and the
// per-batch-element threading of independent products. Also checks the BLAS configuration
// (OpenBLAS single-threaded: our OpenMP loops are the only pool).
// Splits: rows of C (M >= N), columns (M < N), the inner dimension (K ≥ 4 max(M, N)).
#include <gtest/gtest.h>

#include <vector>

#include "lb/ops.h"
#include "src/cpu/blas_config.h"
#include "src/cpu/gemm.h"
#include "testing/testing.h"

namespace lb {
namespace {

// C = alpha op(A) op(B) + beta C0 in double, row-major with leading dims.
std::vector<double> naive(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                          const std::vector<double>& a, int64_t lda, const std::vector<double>& b,
                          int64_t ldb, double beta, const std::vector<double>& c0, int64_t ldc) {
  std::vector<double> c = c0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * acc + beta * c0[i * ldc + j];
    }
  return c;
}

template <typename T>
void check_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double tol) {
  SCOPED_TRACE(std::to_string(ta) + std::to_string(tb) + " m=" + std::to_string(m) +
               " n=" + std::to_string(n) + " k=" + std::to_string(k));
  // Leading dims wider than the matrices (strided rows, as attention's per-head views).
  const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
  const int64_t ra = ta ? k : m, rb = tb ? n : k;
  const DType dt = sizeof(T) == 4 ? DType::F32 : DType::F64;
  const std::vector<double> a = testing::randn({ra * lda}, 1).to_double_vector();
  const std::vector<double> b = testing::randn({rb * ldb}, 2).to_double_vector();
  const std::vector<double> c0 = testing::randn({m * ldc}, 3).to_double_vector();
  Tensor at = Tensor::from_vector(a, {ra * lda}).to(dt), bt = Tensor::from_vector(b, {rb * ldb}).to(dt);
  Tensor ct = Tensor::from_vector(c0, {m * ldc}).to(dt);
  cpu::gemm(ta, tb, m, n, k, T(0.5), at.data<T>(), lda, bt.data<T>(), ldb, T(2), ct.data<T>(), ldc);
  const auto ref = naive(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 2.0, c0, ldc);
  EXPECT_TRUE(testing::all_close(ct, Tensor::from_vector(ref, {m * ldc}).to(dt), tol, tol));
}

TEST(GemmThreads, RawGemmSplitsMatchNaive) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm<double>(ta, tb, 701, 61, 200, 1e-12);  // row blocks, ragged last block
      check_gemm<double>(ta, tb, 61, 701, 200, 1e-12);  // column blocks
      check_gemm<double>(ta, tb, 60, 50, 3001, 1e-12);  // inner dim split, partial sums
      check_gemm<float>(ta, tb, 701, 61, 200, 1e-4);
      check_gemm<float>(ta, tb, 60, 50, 3001, 1e-3);
      check_gemm<float>(ta, tb, 8, 9, 7, 1e-5);         // below the threading threshold
    }
}

// Batched matmul whose per-batch products are independent (threaded by batch element), and
// a broadcast operand whose gradient sums over the batch (the serial loop).
TEST(GemmThreads, BatchedMatmulAndBroadcastGradient) {
  // 6 x 170·90·180 MACs: above the threading threshold, threaded by batch element.
  Tensor a = testing::randn({6, 170, 90}, 4), b = testing::randn({6, 90, 180}, 5);
  Tensor w = testing::randn({90, 180}, 6);
  a.set_requires_grad(true);
  w.set_requires_grad(true);
  const Tensor y = matmul(a, b);
  const auto av = a.to_double_vector(), bv = b.to_double_vector();
  std::vector<double> ref(6 * 170 * 180);
  for (int64_t i = 0; i < 6; ++i) {
    const std::vector<double> ai(av.begin() + i * 170 * 90, av.begin() + (i + 1) * 170 * 90);
    const std::vector<double> bi(bv.begin() + i * 90 * 180, bv.begin() + (i + 1) * 90 * 180);
    const auto ci = naive(false, false, 170, 180, 90, 1.0, ai, 90, bi, 180, 0.0,
                          std::vector<double>(170 * 180, 0.0), 180);
    std::copy(ci.begin(), ci.end(), ref.begin() + i * 170 * 180);
  }
  EXPECT_TRUE(testing::all_close(y, Tensor::from_vector(ref, y.shape()), 1e-12, 1e-12));
  // Transposed per-batch operand (a strided view) and a shared, broadcast right operand.
  const Tensor z = matmul(a.transpose(1, 2), testing::randn({170, 30}, 7));
  const Tensor zr = matmul(a.transpose(1, 2).contiguous(), testing::randn({170, 30}, 7));
  EXPECT_TRUE(testing::all_close(z, zr, 1e-12, 1e-12));
  // g_w of a broadcast (90, 180) weight sums the 6 per-batch products.
  sum(matmul(a, w)).backward();
  const Tensor ones = Tensor::ones({6, 170, 180}, DType::F64);
  const Tensor gw_ref = sum(matmul(a.detach().transpose(1, 2), ones), {0});
  EXPECT_TRUE(testing::all_close(w.grad(), gw_ref, 1e-12, 1e-10));
}

TEST(GemmThreads, OpenBlasRunsSingleThreaded) {
  EXPECT_EQ(cpu::blas_config().blas_threads, 1);
  EXPECT_FALSE(cpu::blas_config().core.empty());
}

}  // namespace
}  // namespace lb
