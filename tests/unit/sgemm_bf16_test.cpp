// The bf16 GEMM kernel (sgemm_bf16.h) against an f64 product of the same bf16-rounded
// operands: every transposition, sizes off the tile and block edges, odd k, alpha and beta.
// The only difference allowed is f32 accumulation: |err| <= 1e-6·Σ|a·b| + 1e-6·|beta·c|.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <cstdlib>

#include "lb/core/dtype.h"
#include "lb/core/precision.h"
#include "src/cpu/cpu_features.h"
#include "lb/core/tensor.h"
#include "src/cpu/gemm.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::cpu {
namespace {

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

void check(const Case& c) {
  std::mt19937 g(static_cast<uint32_t>(c.m * 131 + c.n * 7 + c.k));
  std::normal_distribution<float> d(0.f, 1.f);
  const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 5, ldc = c.n + 2;
  std::vector<float> a((c.ta ? c.k : c.m) * lda), b((c.tb ? c.n : c.k) * ldb), cm(c.m * ldc);
  for (auto& x : a) x = d(g);
  for (auto& x : b) x = d(g);
  for (auto& x : cm) x = d(g);
  const std::vector<float> c0 = cm;
  auto A = [&](int64_t i, int64_t p) { return bf16_to_f32(f32_to_bf16(c.ta ? a[p * lda + i] : a[i * lda + p])); };
  auto B = [&](int64_t p, int64_t j) { return bf16_to_f32(f32_to_bf16(c.tb ? b[j * ldb + p] : b[p * ldb + j])); };
  sgemm_bf16(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a.data(), lda, b.data(), ldb, c.beta, cm.data(), ldc);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0, sabs = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double t = static_cast<double>(A(i, p)) * B(p, j);
        s += t;
        sabs += std::fabs(t);
      }
      const double old = c0[i * ldc + j];
      const double want = c.alpha * s + (c.beta == 0.f ? 0.0 : c.beta * old);
      const double tol = 1e-6 * (std::fabs(c.alpha) * sabs + std::fabs(c.beta * old)) + 1e-30;
      ASSERT_NEAR(cm[i * ldc + j], want, tol) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta
                                              << " tb=" << c.tb << " at (" << i << ", " << j << ")";
    }
  for (int64_t i = 0; i < c.m; ++i)  // the padding past n is never written
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(cm[i * ldc + j], c0[i * ldc + j]);
}

TEST(SgemmBf16, MatchesTheRoundedProductInEveryLayout) {
  if (!sgemm_bf16_available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU (or LEANBACK_ISA caps it)";
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check({8, 48, 32, ta, tb, 1.f, 0.f});
      check({37, 70, 301, ta, tb, 1.f, 0.f});    // tails in m, n (48 + 22), odd k
      check({5, 13, 7, ta, tb, 0.5f, 1.f});      // smaller than one tile, accumulate
      check({50, 113, 1100, ta, tb, 1.f, -0.5f});  // several k blocks (512), three panels
      // packing groups: 19 A micro-panels (8 + 8 + 3 per group), six B panels (4 + 2; the
      // last two 32 + 26 wide), k-pair tails inside a 32-value transpose block
      check({150, 250, 67, ta, tb, 1.f, 0.f});
    }
}

TEST(SgemmBf16, BigBlocksAndTheZeroCases) {
  if (!sgemm_bf16_available()) GTEST_SKIP() << "no AVX512-BF16 on this CPU (or LEANBACK_ISA caps it)";
  check({1600, 500, 64, false, false, 1.f, 0.f});  // more than one A block (1536) and B block (480)
  // k = 0 and alpha = 0 only scale C; beta = 0 ignores NaN in C.
  std::vector<float> c(6, std::nanf("")), a(6, 1.f), b(6, 1.f);
  sgemm_bf16(false, false, 2, 3, 0, 1.f, a.data(), 1, b.data(), 3, 0.f, c.data(), 3);
  for (float v : c) EXPECT_EQ(v, 0.f);
  sgemm_bf16(false, false, 2, 3, 2, 1.f, a.data(), 2, b.data(), 3, 0.f, c.data(), 3);
  for (float v : c) EXPECT_EQ(v, 2.f);
}

// Under MatmulPrecision::BF16 every f32 product through gemm_serial is the product of the
// rounded operands, on the bf16 kernel or (LEANBACK_ISA below avx512-bf16, or a CPU without
// it) through rounded copies on the f32 kernel; f64 products are untouched.
TEST(MatmulPrecision, Bf16RoutesFloatProductsOnEitherPath) {
  const int64_t m = 33, n = 65, k = 130;
  std::mt19937 g(3);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> a(m * k), b(k * n);
  for (auto& x : a) x = d(g);
  for (auto& x : b) x = d(g);
  std::vector<double> want(m * n), exact(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) {
        want[i * n + j] += static_cast<double>(bf16_to_f32(f32_to_bf16(a[i * k + p]))) * bf16_to_f32(f32_to_bf16(b[p * n + j]));
        exact[i * n + j] += static_cast<double>(a[i * k + p]) * b[p * n + j];
      }
  auto run = [&](const char* isa) {
    if (isa)
      setenv("LEANBACK_ISA", isa, 1);
    else
      unsetenv("LEANBACK_ISA");
    reset_isa_cap_for_testing();
    std::vector<float> c(m * n);
    {
      const MatmulPrecisionScope bf16(MatmulPrecision::BF16);
      gemm_serial(false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    }
    return c;
  };
  const char* old = std::getenv("LEANBACK_ISA");
  const std::string saved = old ? old : "";
  const std::vector<float> kernel = run(nullptr), copies = run("avx512");
  if (old) setenv("LEANBACK_ISA", saved.c_str(), 1); else unsetenv("LEANBACK_ISA");
  reset_isa_cap_for_testing();
  EXPECT_EQ(matmul_precision(), MatmulPrecision::F32);  // the scope restored it
  double moved = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    ASSERT_NEAR(kernel[i], want[i], 1e-4) << i;
    ASSERT_NEAR(copies[i], want[i], 1e-4) << i;
    moved = std::max(moved, std::fabs(want[i] - exact[i]));
  }
  EXPECT_GT(moved, 1e-3);  // rounding to bf16 visibly changes the product: the path was taken
  // f64 stays exact under the scope.
  std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), cd(m * n);
  {
    const MatmulPrecisionScope bf16(MatmulPrecision::BF16);
    gemm_serial(false, false, m, n, k, 1.0, ad.data(), k, bd.data(), n, 0.0, cd.data(), n);
  }
  for (int64_t i = 0; i < m * n; ++i) ASSERT_NEAR(cd[i], exact[i], 1e-9);
}

// gemm_into with bf16 operands (activations kept for backward in bf16) gives, bit for bit,
// what the f32 values of those operands give under bf16 products: on the bf16 kernel, which
// reads them as they are, and on the widening path (LEANBACK_ISA below avx512-bf16). Covers
// the layouts the ops use: the batch folded into M (Linear forward), into K (g_w = g_yᵀ x),
// and one product per batch element, with either or both operands bf16.
TEST(MatmulPrecision, Bf16OperandsEqualTheirF32Values) {
  std::mt19937 g(11);
  std::normal_distribution<float> d(0.f, 1.f);
  auto randn = [&](const Shape& shape) {
    std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
    for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(g)));  // values bf16 holds exactly
    return Tensor::from_vector(v, shape);
  };
  struct Layout {
    Shape a, b, c, batch;
    bool ta, tb;
  };
  const Layout layouts[] = {
      {{3, 37, 70}, {50, 70}, {3, 37, 50}, {3}, false, true},  // x wᵀ, batch into M
      {{3, 37, 50}, {3, 37, 70}, {50, 70}, {3}, true, false},  // g_yᵀ x, batch into K
      {{4, 33, 20}, {4, 20, 65}, {4, 33, 65}, {4}, false, false},  // per element
  };
  auto run = [&](const char* isa, const Layout& l, const Tensor& a, const Tensor& b) {
    if (isa) setenv("LEANBACK_ISA", isa, 1); else unsetenv("LEANBACK_ISA");
    reset_isa_cap_for_testing();
    Tensor c = Tensor::empty(l.c, DType::F32, Device::cpu());
    const MatmulPrecisionScope bf16(MatmulPrecision::BF16);
    gemm_into(c, a, l.ta, b, l.tb, l.batch, false);
    return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
  };
  const char* old = std::getenv("LEANBACK_ISA");
  const std::string saved = old ? old : "";
  for (const Layout& l : layouts) {
    const Tensor a = randn(l.a), b = randn(l.b);
    const Tensor a16 = a.to(DType::BF16), b16 = b.to(DType::BF16);
    for (const char* isa : {static_cast<const char*>(nullptr), "avx512"}) {
      const std::vector<float> want = run(isa, l, a, b);
      EXPECT_EQ(run(isa, l, a16, b), want) << (isa ? isa : "native");
      EXPECT_EQ(run(isa, l, a, b16), want) << (isa ? isa : "native");
      EXPECT_EQ(run(isa, l, a16, b16), want) << (isa ? isa : "native");
    }
  }
  if (old) setenv("LEANBACK_ISA", saved.c_str(), 1); else unsetenv("LEANBACK_ISA");
  reset_isa_cap_for_testing();
}

}  // namespace
}  // namespace lb::cpu
