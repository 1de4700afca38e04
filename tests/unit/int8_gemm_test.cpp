// Integer GEMM (src/cpu/int8_gemm.h): exact against a naive int64 loop for odd sizes, every
// transposition, padded leading dimensions, K not a multiple of 4/16, several contraction
// blocks, accumulation, the f32 dequantising epilogue, and wrap-around of the u8 offset trick;
// the AVX2 kernel's int16-sum path on small ranges, at the bounds of its int16 sums.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/int8_gemm_avx2.h"

namespace lb::cpu {
namespace {

struct Case {
  int64_t M, N, K;
};

std::vector<int8_t> random_i8(size_t n, uint32_t seed, int lo = -128, int hi = 127) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int8_t> v(n);
  for (auto& x : v) x = static_cast<int8_t>(d(g));
  return v;
}

// Naive reference in int64 (no wrap-around at all).
std::vector<int64_t> reference(bool ta, bool tb, const Case& c, const std::vector<int8_t>& A,
                               int64_t lda, const std::vector<int8_t>& B, int64_t ldb) {
  std::vector<int64_t> C(static_cast<size_t>(c.M * c.N), 0);
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < c.K; ++k)
        s += int64_t{ta ? A[k * lda + m] : A[m * lda + k]} * int64_t{tb ? B[n * ldb + k] : B[k * ldb + n]};
      C[m * c.N + n] = s;
    }
  return C;
}

TEST(Int8Gemm, ExactAgainstNaive) {
  std::printf("kernel: %s\n", int8_gemm_kernel());
  const std::vector<Case> cases = {{1, 1, 1},    {7, 5, 3},     {6, 64, 4},   {13, 70, 17},
                                   {96, 64, 16}, {100, 130, 259}, {5, 200, 66}, {193, 17, 31},
                                   {33, 65, 4099}, {0, 3, 5},    {4, 3, 0},
                                   {200, 300, 700}};  // the last one runs multi-threaded
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        // Leading dims with slack, so row strides differ from widths.
        const int64_t lda = (ta ? c.M : c.K) + 3, ldb = (tb ? c.K : c.N) + 5, ldc = c.N + 2;
        const auto A = random_i8(static_cast<size_t>((ta ? c.K : c.M) * lda + 1), seed++);
        const auto B = random_i8(static_cast<size_t>((tb ? c.N : c.K) * ldb + 1), seed++);
        const auto ref = reference(ta, tb, c, A, lda, B, ldb);
        std::vector<int32_t> C(static_cast<size_t>(c.M * ldc + 1), 7);
        int8_gemm_s32(ta, tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), ldc);
        std::vector<int32_t> P(static_cast<size_t>(c.M * ldc + 1), 7);
        int8_gemm_s32_portable(ta, tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, P.data(), ldc);
        int bad = 0;
        for (int64_t m = 0; m < c.M; ++m)
          for (int64_t n = 0; n < c.N; ++n) {
            bad += C[m * ldc + n] != ref[m * c.N + n];
            bad += P[m * ldc + n] != ref[m * c.N + n];
          }
        for (int64_t m = 0; m < c.M; ++m)  // the slack columns are untouched
          for (int64_t n = c.N; n < ldc; ++n) bad += C[m * ldc + n] != 7;
        EXPECT_EQ(bad, 0) << "M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << ta << " tb=" << tb;

        // Accumulation adds to what is there.
        std::vector<int32_t> D(static_cast<size_t>(c.M * ldc + 1));
        for (size_t i = 0; i < D.size(); ++i) D[i] = static_cast<int32_t>(i % 1000) - 500;
        const auto D0 = D;
        int8_gemm_s32(ta, tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, D.data(), ldc, true);
        bad = 0;
        for (int64_t m = 0; m < c.M; ++m)
          for (int64_t n = 0; n < c.N; ++n) bad += D[m * ldc + n] != D0[m * ldc + n] + ref[m * c.N + n];
        EXPECT_EQ(bad, 0) << "accumulate M=" << c.M << " N=" << c.N << " K=" << c.K;
      }
}

TEST(Int8Gemm, ContractionLongerThanThePackingBudget) {
  // 3000 columns x 9000: each 4096-deep block of packed B exceeds half the packing budget, so
  // blocks are packed one round at a time (barrier between rounds) with int32 partials.
  const Case c{7, 3000, 9000};
  const auto A = random_i8(static_cast<size_t>(c.M * c.K), 21), B = random_i8(static_cast<size_t>(c.K * c.N), 22);
  std::vector<int32_t> C(static_cast<size_t>(c.M * c.N));
  int8_gemm_s32(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, C.data(), c.N);
  const auto ref = reference(false, false, c, A, c.K, B, c.N);
  int bad = 0;
  for (int64_t i = 0; i < c.M * c.N; ++i) bad += C[i] != ref[i];
  EXPECT_EQ(bad, 0);
}

TEST(Int8Gemm, F32Epilogue) {
  const Case c{37, 70, 45};
  const auto A = random_i8(static_cast<size_t>(c.M * c.K), 11, -7, 7);
  const auto B = random_i8(static_cast<size_t>(c.K * c.N), 12, -7, 7);
  const auto ref = reference(false, false, c, A, c.K, B, c.N);
  std::vector<int8_t> Bt(B.size());  // B stored (N, K) for the column-scale case
  for (int64_t k = 0; k < c.K; ++k)
    for (int64_t n = 0; n < c.N; ++n) Bt[n * c.K + k] = B[k * c.N + n];
  std::vector<float> rs(static_cast<size_t>(c.M));
  for (int64_t m = 0; m < c.M; ++m) rs[m] = 0.01f * static_cast<float>(m + 1);
  const float alpha = 1.f / 16;
  std::vector<float> out(static_cast<size_t>(c.M * c.N), 0.5f);
  int8_gemm_f32(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, out.data(), c.N, rs.data(), alpha);
  std::vector<float> cs(static_cast<size_t>(c.N));
  for (int64_t n = 0; n < c.N; ++n) cs[n] = 0.5f + 0.125f * static_cast<float>(n % 7);
  std::vector<float> oc(out.size());
  int8_gemm_f32(false, true, c.M, c.N, c.K, A.data(), c.K, Bt.data(), c.K, oc.data(), c.N, rs.data(), alpha, false, cs.data());
  std::vector<float> acc(out.size(), 0.25f);
  int8_gemm_f32(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, acc.data(), c.N, nullptr, alpha, true);
  int bad = 0;
  for (int64_t m = 0; m < c.M; ++m)
    for (int64_t n = 0; n < c.N; ++n) {
      const float v = static_cast<float>(ref[m * c.N + n]);
      bad += out[m * c.N + n] != v * (rs[m] * alpha);  // the documented rounding, bit for bit
      bad += acc[m * c.N + n] != 0.25f + v * alpha;
      bad += oc[m * c.N + n] != v * (rs[m] * alpha) * cs[n];
    }
  EXPECT_EQ(bad, 0);
}

TEST(Int8Gemm, WrapAroundOfTheOffsetTrick) {
  // a = b = 127 over K = 70000: the kernel's u8 sums Σ (a+128)·b = 2.27e9 exceed int32, the
  // true result 127²·K = 1.13e9 does not; modular accumulation must give it exactly.
  const Case c{3, 20, 70000};
  std::vector<int8_t> A(static_cast<size_t>(c.M * c.K), 127), B(static_cast<size_t>(c.K * c.N), 127);
  B[5] = -128;  // one different column entry
  std::vector<int32_t> C(static_cast<size_t>(c.M * c.N));
  int8_gemm_s32(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, C.data(), c.N);
  const auto ref = reference(false, false, c, A, c.K, B, c.N);
  for (int64_t i = 0; i < c.M * c.N; ++i) ASSERT_EQ(C[i], ref[i]) << i;
}

#if LB_INT8_GEMM_AVX2
TEST(Int8Gemm, SmallRangesTakeTheAvx2QuadsPathExactly) {
  if (std::string(int8_gemm_kernel()) != "avx2") GTEST_SKIP() << "kernel here: " << int8_gemm_kernel();
  struct Range {
    int alo, ahi, blo, bhi;
    bool quads;  // the ranges allow summing >= 4 quads in int16
  };
  const std::vector<Range> ranges = {{-7, 7, -7, 7, true},       {-127, 127, -7, 7, true},
                                     {-7, 7, -127, 127, true},   {-15, 15, -128, 127, true},
                                     {0, 0, -128, 127, true},    {-16, 16, -128, 127, false},
                                     {-128, 127, -7, 7, false},  {-127, 127, -127, 127, false}};
  const std::vector<Case> cases = {{7, 5, 3}, {13, 70, 17}, {100, 130, 259}, {33, 65, 4099}, {200, 300, 700}};
  uint32_t seed = 100;
  for (const Range& rg : ranges)
    for (const Case& c : cases)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          const int64_t lda = (ta ? c.M : c.K) + 1, ldb = (tb ? c.K : c.N) + 3;
          auto A = random_i8(static_cast<size_t>((ta ? c.K : c.M) * lda), seed++, rg.alo, rg.ahi);
          auto B = random_i8(static_cast<size_t>((tb ? c.N : c.K) * ldb), seed++, rg.blo, rg.bhi);
          // Element (0, 0) of each takes the range's largest magnitude, so small matrices
          // have the whole range too.
          A[0] = static_cast<int8_t>(-rg.alo > rg.ahi ? rg.alo : rg.ahi);
          B[0] = static_cast<int8_t>(-rg.blo > rg.bhi ? rg.blo : rg.bhi);
          const QuadsChoice q = int8_gemm_avx2_quads(ta, tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb);
          EXPECT_EQ(q.span > 0, rg.quads) << "a in [" << rg.alo << ", " << rg.ahi << "], b in [" << rg.blo << ", "
                                          << rg.bhi << "]";
          const auto ref = reference(ta, tb, c, A, lda, B, ldb);
          std::vector<int32_t> C(static_cast<size_t>(c.M * c.N));
          int8_gemm_s32(ta, tb, c.M, c.N, c.K, A.data(), lda, B.data(), ldb, C.data(), c.N);
          int bad = 0;
          for (size_t i = 0; i < C.size(); ++i) bad += C[i] != ref[i];
          EXPECT_EQ(bad, 0) << "a in [" << rg.alo << ", " << rg.ahi << "], b in [" << rg.blo << ", " << rg.bhi
                            << "] M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << ta << " tb=" << tb;
        }
}

TEST(Int8Gemm, Avx2QuadsPathAtTheBoundOfItsInt16Sums) {
  if (std::string(int8_gemm_kernel()) != "avx2") GTEST_SKIP() << "kernel here: " << int8_gemm_kernel();
  // Constant extremes: every int16 partial sum is as large as the span allows (a = 7: u = 14,
  // b = ±7), or u = 0 (a = -7); K crosses contraction blocks and spans alike.
  const Case c{13, 40, 5003};
  for (int a : {7, -7})
    for (int b : {7, -7}) {
      std::vector<int8_t> A(static_cast<size_t>(c.M * c.K), static_cast<int8_t>(a));
      std::vector<int8_t> B(static_cast<size_t>(c.K * c.N), static_cast<int8_t>(b));
      A[0] = static_cast<int8_t>(-a);  // both signs present: the offset is max|a| = 7
      const QuadsChoice q = int8_gemm_avx2_quads(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N);
      EXPECT_EQ(q.offset, 7);
      EXPECT_EQ(q.span, 32767 / (2 * 14 * 7));
      const auto ref = reference(false, false, c, A, c.K, B, c.N);
      std::vector<int32_t> C(static_cast<size_t>(c.M * c.N));
      int8_gemm_s32(false, false, c.M, c.N, c.K, A.data(), c.K, B.data(), c.N, C.data(), c.N);
      for (size_t i = 0; i < C.size(); ++i) ASSERT_EQ(C[i], ref[i]) << "a " << a << " b " << b << " at " << i;
    }
}
#endif

}  // namespace
}  // namespace lb::cpu
