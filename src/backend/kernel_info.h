// Internal: which CPU kernels run on this machine (chosen at run time from the CPU's features
// and LEANBACK_ISA), for the run's environment record and log (src/train/run/run_info.cpp).
#pragma once
#include <string>

namespace lb::backend {

struct CpuKernelInfo {
  const char* isa;        // the instruction set the kernels were chosen for, e.g. "avx512-vnni"
  const char* sgemm;      // the f32 GEMM kernel
  const char* int8_gemm;  // the int8 GEMM kernel (HOT)
};

// src/cpu/kernel_info.cpp
CpuKernelInfo cpu_kernel_info();
// Which kernel runs a bf16 run's products on this CPU, in words.
std::string bf16_products_note();
// Whether a bf16 run's products out-run f32 ones on this CPU (the bf16 kernel is used).
bool bf16_products_faster();

}  // namespace lb::backend
