// Internal: packing int8 B into column quads, as both int8 GEMMs (int8_gemm.cpp,
// int8_gemm_avx2.cpp) lay it out: b[k..k+3, n] as four consecutive bytes, the quad
// vpdpbusd / vpmaddubsw multiply with four bytes of A. SSE2 only, and internal linkage:
// each file's copy is compiled for that file's instructions, never merged with another
// (isa_target.h).
#pragma once
#include <emmintrin.h>

#include <cstdint>

namespace lb::cpu {
namespace {

// Rows k..k+3 of B, 16 bytes each from `b` (rows `ldb` bytes apart), as 16 column quads:
// dst[4c + j] = b[j·ldb + c] (a byte then a word interleave).
inline void rows16_to_quads(const int8_t* b, int64_t ldb, int8_t* dst) {
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + ldb));
  const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * ldb));
  const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 3 * ldb));
  const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
  const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
  __m128i* o = reinterpret_cast<__m128i*>(dst);
  _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(t0, t2));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
}

// The same for any edge: columns past N or rows past `kend` are zeros; `trans_b`: B stored
// (N, K). `n0` columns from n0, k rows from k.
inline void edge_to_quads(bool trans_b, const int8_t* B, int64_t ldb, int64_t N, int64_t k, int64_t kend, int64_t n0,
                          int columns, int8_t* dst) {
  for (int c = 0; c < columns; ++c)
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + c, kk = k + j;
      dst[4 * c + j] = n < N && kk < kend ? (trans_b ? B[n * ldb + kk] : B[kk * ldb + n]) : int8_t{0};
    }
}

}  // namespace
}  // namespace lb::cpu
