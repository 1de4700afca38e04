// The AMX tile kernels (amx_gemm.h). On every CPU their emulated run (the packing, tile
// addressing, chunk loop and epilogues the hardware runs, with the instructions in scalar
// C++) is checked: bf16 against an f64 product of the same rounded operands in every layout
// and operand type, across the k, row and column blocks; int8 exactly against the portable
// loop (int32) and bit for bit against int8_gemm_f32's dequantising epilogue. Where the CPU
// exposes AMX the hardware run is compared with the emulator, and the dispatch with the cap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "lb/core/dtype.h"
#include "src/cpu/amx_gemm.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::cpu {
namespace {

struct Bf16Case {
  int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

// v as an operand of type S: the f32 values, or their bf16 bits.
template <typename S>
std::vector<S> as_operand(const std::vector<float>& v) {
  if constexpr (std::is_same_v<S, float>) {
    return v;
  } else {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = f32_to_bf16(v[i]);
    return h;
  }
}

// Runs one case with operands given as SA / SB (float: rounded while packed; uint16_t: bf16).
template <typename SA, typename SB>
std::vector<float> run_bf16(AmxRun run, const Bf16Case& c, const std::vector<float>& a, int64_t lda,
                            const std::vector<float>& b, int64_t ldb, const std::vector<float>& c0, int64_t ldc) {
  const auto av = as_operand<SA>(a);
  const auto bv = as_operand<SB>(b);
  std::vector<float> out = c0;
  amx_sgemm_bf16<SA, SB>(run, c.ta, c.tb, c.m, c.n, c.k, c.alpha, av.data(), lda, bv.data(), ldb, c.beta,
                         out.data(), ldc);
  return out;
}

template <typename SA, typename SB>
void check_bf16(const Bf16Case& c) {
  std::mt19937 g(static_cast<uint32_t>(c.m * 131 + c.n * 7 + c.k + 1000 * c.ta + 2000 * c.tb));
  std::normal_distribution<float> d(0.f, 1.f);
  const int64_t lda = (c.ta ? c.m : c.k) + 3, ldb = (c.tb ? c.k : c.n) + 5, ldc = c.n + 2;
  std::vector<float> a((c.ta ? c.k : c.m) * lda), b((c.tb ? c.n : c.k) * ldb), c0(c.m * ldc);
  for (auto& x : a) x = d(g);
  for (auto& x : b) x = d(g);
  for (auto& x : c0) x = c.beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : d(g);  // beta = 0 never reads C
  for (int64_t i = 0; i < c.m; ++i)  // the padding past n: must stay as it is
    for (int64_t j = c.n; j < ldc; ++j) c0[i * ldc + j] = 7.f;
  const std::vector<float> out = run_bf16<SA, SB>(AmxRun::Emulated, c, a, lda, b, ldb, c0, ldc);
  auto A = [&](int64_t i, int64_t p) { return bf16_to_f32(f32_to_bf16(c.ta ? a[p * lda + i] : a[i * lda + p])); };
  auto B = [&](int64_t p, int64_t j) { return bf16_to_f32(f32_to_bf16(c.tb ? b[j * ldb + p] : b[p * ldb + j])); };
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0, sabs = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        const double t = static_cast<double>(A(i, p)) * B(p, j);
        s += t;
        sabs += std::fabs(t);
      }
      const double old = c.beta == 0.f ? 0.0 : c0[i * ldc + j];
      const double want = c.alpha * s + c.beta * old;
      // f32 accumulation over up to ~1000 terms per k block (a random walk of roundings).
      const double tol = 1e-5 * (std::fabs(c.alpha) * sabs + std::fabs(c.beta * old)) + 1e-30;
      ASSERT_NEAR(out[i * ldc + j], want, tol) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta
                                               << " tb=" << c.tb << " at (" << i << ", " << j << ")";
    }
    for (int64_t j = c.n; j < ldc; ++j) ASSERT_EQ(out[i * ldc + j], 7.f);
  }
}

const Bf16Case kBf16Cases[] = {
    {1, 1, 1, false, false, 1.f, 0.f},      {5, 7, 3, false, false, 1.f, 0.f},
    {33, 31, 65, false, false, 0.5f, -1.5f}, {16, 16, 32, false, false, 1.f, 0.f},
    {70, 37, 100, false, false, 1.f, 1.f},   {40, 270, 1100, false, false, 1.f, 0.f},  // two k and column blocks
    {130, 40, 64, false, false, -2.f, 0.f},  // three row blocks
};

TEST(AmxGemm, EmulatedBf16MatchesTheRoundedProductInEveryLayout) {
  for (const Bf16Case& base : kBf16Cases)
    for (int t = 0; t < 4; ++t) {
      Bf16Case c = base;
      c.ta = t & 1;
      c.tb = t & 2;
      check_bf16<float, float>(c);
    }
}

TEST(AmxGemm, EmulatedBf16ReadsBf16OperandsAsTheyAre) {
  for (const Bf16Case& base : {kBf16Cases[2], kBf16Cases[4]})
    for (int t = 0; t < 4; ++t) {
      Bf16Case c = base;
      c.ta = t & 1;
      c.tb = t & 2;
      check_bf16<uint16_t, float>(c);
      check_bf16<float, uint16_t>(c);
      check_bf16<uint16_t, uint16_t>(c);
    }
}

TEST(AmxGemm, EmulatedBf16ScalesCWhenThereIsNothingToMultiply) {
  std::vector<float> c = {1.f, 2.f, 3.f, 4.f};
  const float a = 1.f, b = 1.f;
  amx_sgemm_bf16<float, float>(AmxRun::Emulated, false, false, 2, 2, 0, 1.f, &a, 1, &b, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
}

struct Int8Case {
  int64_t m, n, k;
};

std::vector<int8_t> random_int8(size_t count, std::mt19937& g) {
  std::uniform_int_distribution<int> d(-128, 127);
  std::vector<int8_t> v(count);
  for (auto& x : v) x = static_cast<int8_t>(d(g));
  return v;
}

const Int8Case kInt8Cases[] = {{1, 1, 1}, {7, 5, 3}, {33, 31, 65}, {32, 32, 64}, {100, 70, 200},
                               {3, 40, 16384 + 130}};  // the last crosses a k block

TEST(AmxGemm, EmulatedInt8EqualsThePortableLoopExactly) {
  for (const Int8Case& c : kInt8Cases)
    for (int t = 0; t < 8; ++t) {
      const bool ta = t & 1, tb = t & 2, acc = t & 4;
      std::mt19937 g(static_cast<uint32_t>(c.m * 17 + c.n * 3 + c.k + t));
      const int64_t lda = (ta ? c.m : c.k) + 1, ldb = (tb ? c.k : c.n) + 3, ldc = c.n + 4;
      const auto a = random_int8(static_cast<size_t>((ta ? c.k : c.m) * lda), g);
      const auto b = random_int8(static_cast<size_t>((tb ? c.n : c.k) * ldb), g);
      std::vector<int32_t> want(static_cast<size_t>(c.m * ldc));
      for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int32_t>(i * 2654435761u);
      std::vector<int32_t> got = want;
      int8_gemm_s32_portable(ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, want.data(), ldc, acc);
      AmxInt8Output o;
      o.c = got.data();
      o.ld = ldc;
      o.accumulate = acc;
      amx_int8_gemm(AmxRun::Emulated, ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, o);
      ASSERT_EQ(got, want) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << ta << " tb=" << tb
                           << " accumulate=" << acc;
    }
}

TEST(AmxGemm, EmulatedInt8DequantisesAsTheVectorKernel) {
  for (const Int8Case& c : {kInt8Cases[2], kInt8Cases[4]})
    for (int t = 0; t < 8; ++t) {
      const bool ta = t & 1, tb = t & 2, acc = t & 4;
      std::mt19937 g(static_cast<uint32_t>(c.m + c.n + c.k + 11 * t));
      const int64_t lda = ta ? c.m : c.k, ldb = tb ? c.k : c.n, ldo = c.n + 1;
      const auto a = random_int8(static_cast<size_t>((ta ? c.k : c.m) * lda), g);
      const auto b = random_int8(static_cast<size_t>((tb ? c.n : c.k) * ldb), g);
      std::uniform_real_distribution<float> u(0.001f, 0.1f);
      std::vector<float> rows(static_cast<size_t>(c.m)), cols(static_cast<size_t>(c.n)), want(c.m * ldo);
      for (auto& x : rows) x = u(g);
      for (auto& x : cols) x = u(g);
      for (auto& x : want) x = u(g) - 0.05f;
      std::vector<float> got = want;
      int8_gemm_f32(ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, want.data(), ldo, rows.data(), 0.37f, acc,
                    cols.data());
      AmxInt8Output o;
      o.to_f32 = true;
      o.out = got.data();
      o.ld = ldo;
      o.row_scale = rows.data();
      o.col_scale = cols.data();
      o.alpha = 0.37f;
      o.accumulate = acc;
      amx_int8_gemm(AmxRun::Emulated, ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, o);
      ASSERT_EQ(got, want) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << ta << " tb=" << tb
                           << " accumulate=" << acc << " (" << int8_gemm_kernel() << ")";
    }
}

TEST(AmxGemm, HardwareMatchesTheEmulator) {
  if (!amx_bf16_available() || !amx_int8_available())
    GTEST_SKIP() << "no AMX-BF16 + AMX-INT8 tiles here (CPU '" << cpu_features().brand
                 << "'; Linux permission and LEANBACK_ISA also needed): the tile instructions run only in "
                    "the emulator on this machine";
  EXPECT_NE(std::string(sgemm_bf16_kernel_name()).find("amx"), std::string::npos);
  EXPECT_STREQ(int8_gemm_kernel(), "amx-int8");
  for (const Bf16Case& base : kBf16Cases)
    for (int t = 0; t < 4; ++t) {
      Bf16Case c = base;
      c.ta = t & 1;
      c.tb = t & 2;
      std::mt19937 g(static_cast<uint32_t>(c.m + c.n + c.k + t));
      std::normal_distribution<float> d(0.f, 1.f);
      const int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = c.n;
      std::vector<float> a((c.ta ? c.k : c.m) * lda), b((c.tb ? c.n : c.k) * ldb), c0(c.m * ldc);
      for (auto& x : a) x = d(g);
      for (auto& x : b) x = d(g);
      for (auto& x : c0) x = d(g);
      const auto hw = run_bf16<float, float>(AmxRun::Hardware, c, a, lda, b, ldb, c0, ldc);
      const auto emu = run_bf16<float, float>(AmxRun::Emulated, c, a, lda, b, ldb, c0, ldc);
      for (size_t i = 0; i < hw.size(); ++i)
        ASSERT_NEAR(hw[i], emu[i], 1e-5 * (1 + std::fabs(emu[i])) * std::sqrt(static_cast<double>(c.k)))
            << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << c.ta << " tb=" << c.tb << " at " << i;
    }
  for (const Int8Case& c : kInt8Cases)
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      std::mt19937 g(static_cast<uint32_t>(c.m * 5 + c.n + c.k + t));
      const int64_t lda = ta ? c.m : c.k, ldb = tb ? c.k : c.n;
      const auto a = random_int8(static_cast<size_t>((ta ? c.k : c.m) * lda), g);
      const auto b = random_int8(static_cast<size_t>((tb ? c.n : c.k) * ldb), g);
      std::vector<int32_t> hw(static_cast<size_t>(c.m * c.n)), emu(hw.size());
      AmxInt8Output o;
      o.c = hw.data();
      o.ld = c.n;
      amx_int8_gemm(AmxRun::Hardware, ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, o);
      o.c = emu.data();
      amx_int8_gemm(AmxRun::Emulated, ta, tb, c.m, c.n, c.k, a.data(), lda, b.data(), ldb, o);
      ASSERT_EQ(hw, emu) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " ta=" << ta << " tb=" << tb;
    }
  // LEANBACK_ISA below amx takes the vector kernels again.
  setenv("LEANBACK_ISA", "avx512-bf16", 1);
  reset_isa_cap_for_testing();
  EXPECT_FALSE(amx_bf16_available());
  EXPECT_STREQ(int8_gemm_kernel(), "avx512-vnni");
  unsetenv("LEANBACK_ISA");
  reset_isa_cap_for_testing();
}

}  // namespace
}  // namespace lb::cpu
