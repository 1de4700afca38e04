// Run-time CPU feature detection and the LEANBACK_ISA cap: what cpuid reports agrees with the
// kernel's /proc/cpuinfo flags, the cap lowers the kernels chosen (and the lowered kernels
// give the same numbers), and a mistyped value is a named error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "lb/core/error.h"
#include "src/cpu/amx_gemm.h"
#include "src/cpu/cpu_features.h"
#include "testing/testing.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/sgemm_avx512.h"

namespace lb::cpu {
namespace {

// The "flags" line of /proc/cpuinfo, space-padded ("" when unreadable).
std::string proc_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) return " " + line.substr(line.find(':') + 1) + " ";
  return "";
}

using lb::testing::ScopedIsa;

TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
  const std::string flags = proc_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line";
  auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  const CpuFeatures& c = cpu_features();
  std::printf("%s\n", isa_summary().c_str());
  EXPECT_EQ(c.avx2, has("avx2"));
  EXPECT_EQ(c.avx512f, has("avx512f"));
  EXPECT_EQ(c.avx512bw, has("avx512bw"));
  EXPECT_EQ(c.avx512vl, has("avx512vl"));
  EXPECT_EQ(c.avx512vnni, has("avx512_vnni"));
  EXPECT_EQ(c.avx512bf16, has("avx512_bf16"));
  EXPECT_EQ(c.amx_tile, has("amx_tile"));
  EXPECT_EQ(c.amx_int8, has("amx_int8"));
}

TEST(CpuFeatures, CapLowersTheKernelsChosen) {
  {
    ScopedIsa isa(nullptr);
    EXPECT_EQ(isa_cap(), Isa::Amx);
    EXPECT_EQ(sgemm_avx512_available(), cpu_has(Isa::Avx512));
    // AMX tiles where the CPU has them and the OS permits them, else VNNI, else AVX2, else
    // the loops.
    EXPECT_EQ(std::string(int8_gemm_kernel()), amx_int8_available()           ? "amx-int8"
                                               : cpu_has(Isa::Avx512Vnni) ? "avx512-vnni"
                                               : cpu_has(Isa::Avx2)       ? "avx2"
                                                                          : "portable");
  }
  {
    ScopedIsa isa("portable");
    EXPECT_EQ(isa_selected(), Isa::Portable);
    EXPECT_FALSE(sgemm_avx512_available());
    EXPECT_STREQ(sgemm_kernel_name(), "openblas");
    EXPECT_STREQ(int8_gemm_kernel(), "portable");
  }
  {
    ScopedIsa isa("avx512");
    EXPECT_LE(static_cast<int>(isa_selected()), static_cast<int>(Isa::Avx512));
    // VNNI is above the cap
    EXPECT_STREQ(int8_gemm_kernel(), cpu_has(Isa::Avx2) ? "avx2" : "portable");
    EXPECT_EQ(sgemm_avx512_available(), cpu_has(Isa::Avx512));
  }
  {
    ScopedIsa isa("avx2");
    EXPECT_LE(static_cast<int>(isa_selected()), static_cast<int>(Isa::Avx2));
    EXPECT_FALSE(sgemm_avx512_available());
    EXPECT_STREQ(int8_gemm_kernel(), cpu_has(Isa::Avx2) ? "avx2" : "portable");
  }
}

TEST(CpuFeatures, UnknownValueIsANamedError) {
  ScopedIsa isa("avx9000");
  try {
    check_isa_env();
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("LEANBACK_ISA='avx9000'"), std::string::npos) << m;
    EXPECT_NE(m.find("portable|avx2|avx512|avx512-vnni|avx512-bf16|amx"), std::string::npos) << m;
  }
  EXPECT_EQ(isa_cap(), Isa::Portable);  // the library alone falls back to the safe kernels
}

// The same products through every level this CPU has: float GEMM agrees to rounding, int8
// GEMM exactly.
TEST(CpuFeatures, EveryLevelComputesTheSameProducts) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> q(-127, 127);
  const int64_t M = 37, N = 70, K = 300;
  std::vector<float> a(M * K), b(K * N);
  std::vector<int8_t> qa(M * K), qb(K * N);
  for (auto& v : a) v = u(rng);
  for (auto& v : b) v = u(rng);
  for (auto& v : qa) v = static_cast<int8_t>(q(rng));
  for (auto& v : qb) v = static_cast<int8_t>(q(rng));
  std::vector<std::vector<float>> cf;
  std::vector<std::vector<int32_t>> ci;
  for (const char* level : {"portable", "avx2", "avx512", "avx512-vnni", "avx512-bf16", "amx"}) {
    ScopedIsa isa(level);
    std::vector<float> c(M * N);
    std::vector<int32_t> c8(M * N);
    gemm_serial(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
    int8_gemm_s32(false, false, M, N, K, qa.data(), K, qb.data(), N, c8.data(), N);
    cf.push_back(c);
    ci.push_back(c8);
  }
  for (size_t l = 1; l < cf.size(); ++l) {
    for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(cf[l][i], cf[0][i], 1e-4f) << "level " << l << " at " << i;
    EXPECT_EQ(ci[l], ci[0]) << "level " << l;
  }
}

}  // namespace
}  // namespace lb::cpu
