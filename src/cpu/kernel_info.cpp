// The CPU kernels chosen on this machine, by name (src/backend/kernel_info.h).
#include "src/backend/kernel_info.h"

#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm.h"
#include "src/cpu/sgemm_avx512.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::backend {

CpuKernelInfo cpu_kernel_info() {
  return {cpu::isa_name(cpu::isa_selected()), cpu::sgemm_kernel_name(), cpu::int8_gemm_kernel()};
}

std::string bf16_products_note() {
  if (cpu::sgemm_bf16_preferred()) return cpu::sgemm_bf16_kernel_name();
  return cpu::sgemm_bf16_available()
             ? "rounded operands through the f32 kernel (vdpbf16ps runs below the f32 FMA rate on this CPU: "
               "same numbers, no speed-up)"
             : "rounded operands through the f32 kernel (this CPU has no AVX512-BF16: same numbers, no speed-up)";
}

bool bf16_products_faster() { return cpu::sgemm_bf16_preferred(); }

}  // namespace lb::backend
