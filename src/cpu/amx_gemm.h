// GEMMs on Intel AMX tiles (Sapphire Rapids and later): bf16 × bf16 → f32 (TDPBF16PS) and
// int8 × int8 → int32 (TDPBSSD), the CPU's matrix engine. Same contracts as the AVX-512
// kernels they stand in for: amx_sgemm_bf16 as sgemm_bf16 (sgemm_bf16.h: operands rounded to
// bf16 round-to-nearest-even, or given as bf16 values, f32 accumulation, cblas argument
// order, single-threaded and safe from several threads at once) and amx_int8_gemm as
// int8_gemm_s32 / int8_gemm_f32 (int8_gemm.h: int32 sums exact modulo 2^32, the same
// dequantising epilogue, so its f32 results equal the VNNI kernel's bit for bit).
//
// One tile program serves two machines: the hardware (AmxRun::Hardware; only where
// amx_*_available() says the CPU has the tiles and Linux granted them) and a scalar emulator
// of the same eight tiles and instructions (AmxRun::Emulated, any CPU). The emulator runs
// the packing, the tile addressing, the loop over contraction chunks and the epilogue that
// the hardware runs, so the CPU suite tests all of it on machines without AMX; only the
// instructions themselves need an AMX machine (tests/unit/amx_gemm_test.cpp compares the two there).
#pragma once
#include <cstdint>

namespace lb::cpu {

// The CPU has AMX-BF16 / AMX-INT8 tiles, Linux granted tile data, and LEANBACK_ISA allows
// `amx` (cpu_features.h).
bool amx_bf16_available();
bool amx_int8_available();

enum class AmxRun { Hardware, Emulated };

// C = alpha·op(A)·op(B) + beta·C (beta = 0 never reads C). SA, SB: float (rounded to bf16
// while packed) or uint16_t (bf16 values, packed as they are).
template <typename SA, typename SB>
void amx_sgemm_bf16(AmxRun run, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const SA* a, int64_t lda, const SB* b, int64_t ldb, float beta, float* c, int64_t ldc);

// Where an int8 product goes: int32 C (to_f32 false), or f32
// out[m, n] (+)= float(Σ a·b) · (row_scale[m] · alpha) · col_scale[n] (scales may be null).
struct AmxInt8Output {
  bool to_f32 = false;
  bool accumulate = false;
  int32_t* c = nullptr;
  float* out = nullptr;
  int64_t ld = 0;
  const float* row_scale = nullptr;
  const float* col_scale = nullptr;
  float alpha = 1.f;
};

// op(A) (M, K) · op(B) (K, N), int8 operands (A: (M, K) row-major with lda, or stored (K, M)
// when trans_a; B likewise). Parallel over OpenMP threads (as int8_gemm_s32).
void amx_int8_gemm(AmxRun run, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, const AmxInt8Output& out);

}  // namespace lb::cpu
