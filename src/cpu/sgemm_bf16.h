// Single-threaded bf16 GEMM with f32 accumulation on AVX512-BF16 (vdpbf16ps), the CPU half
// of `precision: "bf16"`. Same contract as gemm_serial (row-major, cblas argument order,
// C = alpha·op(A)·op(B) + beta·C, beta = 0 never reads C, safe from several threads at once),
// except that A and B are rounded to bf16 (round to nearest even) as they are packed: the
// result is the exact product of the rounded operands, accumulated in f32. Inputs stay f32
// in memory, so callers need no bf16 copies (autocast-style mixed precision). Values below
// f32's normal range count as zero (vcvtne2ps2bf16 and vdpbf16ps treat denormals as zero).
#pragma once
#include <cstdint>

namespace lb::cpu {

// True when this CPU has AVX512-BF16 and LEANBACK_ISA allows it (cpu_features.h).
bool sgemm_bf16_available();

// Name of the bf16 kernel ("amx-bf16 (32x32 tiles)", "avx512-bf16 (8x48)"), or "none".
const char* sgemm_bf16_kernel_name();

// vdpbf16ps's multiply-add rate over vfmadd231ps's on this CPU (zmm, independent chains),
// measured once (~5 ms) on first use; 0 without the kernel. Zen 4/5 run two bf16 products
// per lane where an FMA runs one (about 2); the Sapphire Rapids-class Xeons seen here issue
// vdpbf16ps at a quarter of the FMA rate (about 0.5), so there the bf16 kernel loses.
double bf16_dot_speedup();

// Whether MatmulPrecision::BF16 products should run on the bf16 kernel: it is available and
// bf16_dot_speedup() >= 1.1. Otherwise they multiply rounded copies on the f32 kernel (same
// numbers up to f32 summation order). LEANBACK_BF16_KERNEL=1 / 0 overrides the measurement.
bool sgemm_bf16_preferred();

// Callers check sgemm_bf16_available() first. Where the CPU has AMX-BF16 (and LEANBACK_ISA
// allows amx) the product runs on the tiles (amx_gemm.h), same contract.
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc);

// The same with either operand given as bf16 values (uint16_t, as DType::BF16 stores them,
// e.g. an activation kept for backward in bf16): packed as they are, without a conversion to
// f32 and back. The result equals sgemm_bf16 on their f32 values, bit for bit.
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const uint16_t* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc);
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                int64_t ldc);
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                float* c, int64_t ldc);

}  // namespace lb::cpu
