// Single-threaded float GEMM with AVX-512 (Goto/BLIS style), used by gemm_serial for f32
// products. Same contract as gemm_serial (gemm_serial.h): row-major, cblas argument order,
// C = alpha·op(A)·op(B) + beta·C with C (m, n), op(A) (m, k), op(B) (k, n); beta = 0 never
// reads C; safe to call concurrently from several threads (packing buffers are per thread).
#pragma once
#include <cstdint>

namespace lb::cpu {

// True when this CPU runs AVX-512 F/BW/DQ/VL and LEANBACK_ISA allows it (cpu_features.h);
// otherwise sgemm_avx512 must not be called.
bool sgemm_avx512_available();

// Name of the float GEMM kernel gemm_serial uses, for `leanback info` and benchmarks.
const char* sgemm_kernel_name();

void sgemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc);

}  // namespace lb::cpu
