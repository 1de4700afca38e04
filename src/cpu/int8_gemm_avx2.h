// The AVX2 kernel of the integer GEMM (contract in int8_gemm.h), for CPUs without AVX-512
// VNNI: AMD Zen 1-3, Intel Haswell to Comet Lake and the client cores from Alder Lake on.
// int8_gemm.cpp runs it where cpu::isa_enabled(Isa::Avx2) and no wider kernel is enabled.
#pragma once
#include <cstdint>

#include "src/cpu/amx_gemm.h"

namespace lb::cpu {

#if defined(__x86_64__)
#define LB_INT8_GEMM_AVX2 1
// op(A) (M, K) · op(B) (K, N) into `out` (int32 or the dequantising f32 epilogue), exact:
// the same int32 sums, modulo 2^32, as int8_gemm_s32_portable, and the f32 epilogue's
// roundings in its order. Parallel over OpenMP threads. Only after isa_enabled(Isa::Avx2).
void int8_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                    const int8_t* B, int64_t ldb, const AmxInt8Output& out);

// Which of its two exact paths int8_gemm_avx2 takes for these operands (int8_gemm_avx2.cpp;
// only after isa_enabled(Isa::Avx2)):
// span > 0 is the quads path (vpmaddubsw on A + offset, int16 sums over `span` quads), whose
// ranges allow it (e.g. 4-bit levels); span 0 the int16 pairs path (any int8).
struct QuadsChoice {
  int offset = 0;
  int64_t span = 0;
};
QuadsChoice int8_gemm_avx2_quads(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                                 int64_t lda, const int8_t* B, int64_t ldb);
#endif

}  // namespace lb::cpu
