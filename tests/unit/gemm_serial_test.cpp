// Serial GEMM entry point (src/cpu/gemm_serial.h) and the AVX-512 float kernel behind it
// (src/cpu/sgemm_avx512.h): against a naive double-accumulated reference over ragged shapes
// (primes, 1 x N x 1, shapes crossing the kernel's k/n/m blocks, shapes where the kernel
// reads A and/or B in place instead of packing them), all four transpositions,
// padded leading dimensions, alpha/beta combinations, beta = 0 over NaN-filled C, k = 0,
// m or n = 0, and concurrent calls from several threads. The bound is the classical
// floating-point dot-product bound: |error| <= 2 (K + 2) eps Σ|alpha a b| + |beta c| terms.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "src/cpu/gemm_serial.h"
#include "src/cpu/sgemm_avx512.h"

namespace lb::cpu {
namespace {

struct Shape3 {
  int64_t m, n, k;
};

using GemmFn = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                        const float*, int64_t, float, float*, int64_t);

void serial_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

std::vector<float> random_f32(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Runs one product through `fn` and checks every element of C (and that the padding
// columns of C are untouched). Returns the number of bad elements (reported once).
int check_case(GemmFn fn, bool ta, bool tb, Shape3 s, float alpha, float beta, uint32_t seed,
               bool nan_c = false) {
  const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 5, ldc = s.n + 2;
  const auto A = random_f32(static_cast<size_t>((ta ? s.k : s.m) * lda + 1), seed);
  const auto B = random_f32(static_cast<size_t>((tb ? s.n : s.k) * ldb + 1), seed + 1000);
  auto C = random_f32(static_cast<size_t>(s.m * ldc + 1), seed + 2000);
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t j = s.n; j < ldc; ++j) C[i * ldc + j] = 12345.f;  // sentinels
  if (nan_c)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) C[i * ldc + j] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> C0 = C;
  fn(ta, tb, s.m, s.n, s.k, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  const double eps = std::numeric_limits<float>::epsilon();
  int bad = 0;
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = C[i * ldc + j];
      if (j >= s.n) {
        if (got != 12345.f && bad++ == 0)
          ADD_FAILURE() << "padding of C written at (" << i << ", " << j << ")";
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double a = ta ? A[p * lda + i] : A[i * lda + p];
        const double b = tb ? B[j * ldb + p] : B[p * ldb + j];
        ref += a * b;
        mag += std::fabs(a * b);
      }
      ref *= alpha;
      mag *= std::fabs(alpha);
      if (beta != 0.f) {
        ref += static_cast<double>(beta) * C0[i * ldc + j];
        mag += std::fabs(static_cast<double>(beta) * C0[i * ldc + j]);
      }
      const double tol = 2.0 * static_cast<double>(s.k + 2) * eps * mag + 1e-30;
      if (!(std::fabs(got - ref) <= tol) && bad++ == 0)
        ADD_FAILURE() << "ta=" << ta << " tb=" << tb << " m=" << s.m << " n=" << s.n
                      << " k=" << s.k << " alpha=" << alpha << " beta=" << beta << " nan_c="
                      << nan_c << ": C(" << i << ", " << j << ") = " << got << ", expected "
                      << ref << " (tol " << tol << ")";
    }
  }
  return bad;
}

const std::vector<Shape3>& shapes() {
  static const std::vector<Shape3> s = {
      {1, 1, 1},    {1, 17, 1},   {17, 1, 1},   {1, 1, 300},  {2, 3, 5},     {7, 11, 13},
      {8, 48, 8},   {9, 49, 9},   {16, 32, 16}, {23, 47, 31}, {64, 64, 64},  {31, 97, 127},
      {101, 5, 67}, {5, 257, 3},  {3, 200, 17}, {1, 300, 41}, {300, 1, 41},  {97, 113, 389},
      {37, 490, 7}, {13, 1000, 9}, {130, 70, 800}, {1600, 3, 5}, {251, 241, 239},
      // Operands read in place (m % 8 == 0 and n <= 128 for A; n % 16 == 0 and m <= 128
      // for B), one or both, and across k blocks.
      {64, 128, 300}, {136, 64, 700}, {128, 144, 33}, {1024, 64, 40}, {24, 16, 520}};
  return s;
}

TEST(GemmSerial, F32AgainstNaiveAllTranspositions) {
  std::printf("float kernel: %s\n", sgemm_kernel_name());
  const float alphas[] = {1.f, -0.5f};
  const float betas[] = {0.f, 1.f, 0.75f};
  uint32_t seed = 1;
  int combo = 0;
  for (const Shape3& s : shapes())
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        // Cycle through the alpha/beta pairs (all pairs on all shapes would be slow).
        const float alpha = alphas[combo % 2], beta = betas[(combo / 2) % 3];
        ++combo;
        EXPECT_EQ(check_case(serial_f32, ta, tb, s, alpha, beta, seed), 0);
        seed += 7;
      }
}

TEST(GemmSerial, F32AllAlphaBetaPairs) {
  uint32_t seed = 100;
  for (const Shape3& s : {Shape3{19, 53, 29}, Shape3{8, 48, 400}, Shape3{1, 33, 2}})
    for (float alpha : {1.f, -0.5f, 0.f})
      for (float beta : {0.f, 1.f, 0.75f})
        for (int t = 0; t < 4; ++t)
          EXPECT_EQ(check_case(serial_f32, t & 1, t & 2, s, alpha, beta, seed++), 0);
}

TEST(GemmSerial, F32BetaZeroIgnoresNaNInC) {
  uint32_t seed = 200;
  for (const Shape3& s : {Shape3{13, 50, 20}, Shape3{9, 1, 5}, Shape3{40, 100, 500}})
    for (int t = 0; t < 4; ++t) {
      EXPECT_EQ(check_case(serial_f32, t & 1, t & 2, s, 1.f, 0.f, seed++, true), 0);
      EXPECT_EQ(check_case(serial_f32, t & 1, t & 2, s, -0.5f, 0.f, seed++, true), 0);
    }
  // k = 0 with beta = 0 also writes zeros over NaN.
  EXPECT_EQ(check_case(serial_f32, false, false, {5, 7, 0}, 1.f, 0.f, seed++, true), 0);
}

TEST(GemmSerial, F32EmptySizes) {
  uint32_t seed = 300;
  // k = 0: C = beta·C.
  for (float beta : {0.f, 1.f, 0.75f})
    EXPECT_EQ(check_case(serial_f32, false, true, {6, 19, 0}, 1.f, beta, seed++), 0);
  // m = 0 or n = 0: nothing is touched (null pointers are fine).
  gemm_serial(false, false, 0, 5, 3, 1.f, static_cast<const float*>(nullptr), 3, nullptr, 5, 0.f,
              static_cast<float*>(nullptr), 5);
  gemm_serial(true, true, 4, 0, 3, 1.f, static_cast<const float*>(nullptr), 4, nullptr, 3, 0.f,
              static_cast<float*>(nullptr), 1);
}

// The kernel directly on narrow products (the dispatcher sends n < 16 to OpenBLAS).
TEST(GemmSerial, Avx512KernelDirect) {
  if (!sgemm_avx512_available()) GTEST_SKIP() << "no AVX-512 in this build";
  uint32_t seed = 400;
  for (const Shape3& s : {Shape3{300, 1, 41}, Shape3{17, 1, 1}, Shape3{33, 2, 70}, Shape3{7, 11, 13},
                          Shape3{101, 5, 67}, Shape3{1600, 3, 5}, Shape3{9, 15, 300}})
    for (int t = 0; t < 4; ++t)
      EXPECT_EQ(check_case(sgemm_avx512, t & 1, t & 2, s, -0.5f, 0.75f, seed++), 0);
}

// Packing buffers are per thread: concurrent calls with different shapes stay correct.
TEST(GemmSerial, F32ConcurrentCalls) {
  const std::vector<Shape3> s = {{97, 113, 389}, {130, 70, 800}, {64, 480, 64}, {251, 241, 23}};
  int bad = 0;
#pragma omp parallel for num_threads(4) schedule(dynamic) reduction(+ : bad)
  for (int i = 0; i < 16; ++i) {
    const Shape3& sh = s[static_cast<size_t>(i) % s.size()];
    bad += check_case(serial_f32, i & 1, i & 2, sh, 1.f, 0.f, 500 + static_cast<uint32_t>(i));
  }
  EXPECT_EQ(bad, 0);
}

TEST(GemmSerial, F64AgainstNaive) {
  // The double overload (OpenBLAS) on a few shapes, bound at double epsilon.
  for (const Shape3& s : {Shape3{7, 11, 13}, Shape3{64, 33, 100}})
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const int64_t lda = (ta ? s.m : s.k) + 1, ldb = (tb ? s.k : s.n) + 2, ldc = s.n + 3;
      std::mt19937 g(static_cast<uint32_t>(t + 7));
      std::uniform_real_distribution<double> d(-1, 1);
      std::vector<double> A(static_cast<size_t>((ta ? s.k : s.m) * lda)),
          B(static_cast<size_t>((tb ? s.n : s.k) * ldb)), C(static_cast<size_t>(s.m * ldc));
      for (auto& x : A) x = d(g);
      for (auto& x : B) x = d(g);
      for (auto& x : C) x = d(g);
      const std::vector<double> C0 = C;
      gemm_serial(ta, tb, s.m, s.n, s.k, 2.0, A.data(), lda, B.data(), ldb, 0.5, C.data(), ldc);
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t j = 0; j < s.n; ++j) {
          double ref = 0.5 * C0[i * ldc + j];
          for (int64_t p = 0; p < s.k; ++p)
            ref += 2.0 * (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
          EXPECT_NEAR(C[i * ldc + j], ref, 1e-12) << "t=" << t << " (" << i << ", " << j << ")";
        }
    }
}

}  // namespace
}  // namespace lb::cpu
