// Which vector instructions this CPU runs, detected at run time (cpuid, the OS's saved-state
// mask from xgetbv, and Linux's permission for AMX tile data), and which of them the kernels
// may use. Every ISA-specific kernel (float, bf16 and int8 GEMMs, the HOT quantisers, relu)
// is compiled into every build with per-function target attributes (isa_target.h) and asks
// `isa_enabled` before it runs, so a portable build (LEANBACK_PORTABLE, no -march=native)
// runs the AVX-512 kernels where the CPU has them and the portable loops elsewhere.
//
// LEANBACK_ISA=portable|avx2|avx512|avx512-vnni|avx512-bf16|amx caps the level (a lower one
// forces the fallbacks, for tests and comparisons); unset means the highest the CPU has.
#pragma once
#include <string>

namespace lb::cpu {

// Kernel levels, each implying the ones before it for the purpose of the cap.
enum class Isa : int {
  Portable = 0,   // plain C++ loops / OpenBLAS
  Avx2 = 1,       // AVX2 + FMA
  Avx512 = 2,     // AVX-512 F, BW, DQ, VL
  Avx512Vnni = 3, // + VNNI (vpdpbusd: int8 GEMM)
  Avx512Bf16 = 4, // + AVX512-BF16 (vdpbf16ps: bf16 GEMM)
  Amx = 5,        // AMX tiles (BF16 / INT8), permission granted by the kernel
};

struct CpuFeatures {
  std::string brand;  // cpuid brand string
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512dq = false, avx512vl = false;
  bool avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool amx_permitted = false;  // arch_prctl(ARCH_REQ_XCOMP_PERM) granted tile data
};

// Detected once per process (thread-safe).
const CpuFeatures& cpu_features();

// Whether the CPU has everything level `isa` needs (ignoring the cap).
bool cpu_has(Isa isa);

// The cap from LEANBACK_ISA (Isa::Amx when unset). An unknown value prints one warning to
// stderr and caps at Portable; `check_isa_env` turns it into an error for the CLI.
Isa isa_cap();

// The CPU has it and the cap allows it: what kernels test before using a level.
bool isa_enabled(Isa isa);

// The highest enabled level.
Isa isa_selected();

const char* isa_name(Isa isa);  // "avx512-vnni", ...

// Throws lb::Error naming LEANBACK_ISA and the accepted values when it is set to something
// unknown (the CLI calls this before any work).
void check_isa_env();

// Re-reads LEANBACK_ISA (tests that set it at run time).
void reset_isa_cap_for_testing();

// One line for `leanback info`: the CPU's features and the cap.
std::string isa_summary();

}  // namespace lb::cpu
