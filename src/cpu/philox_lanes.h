// Internal: Philox4x32-10 for kLanes consecutive blocks at once (the round function of
// philox4x32_10 in lb/core/philox.h, laid out lane-parallel: AVX-512 intrinsics where the
// build has them, else a loop GCC vectorizes), the dropout keep decisions built on it, and
// their packing to one bit per element. Shared by dropout and the fused attention's dropout so
// both follow one randomness convention: draw number o of the stream (o = offset + element
// index) keeps its element iff philox_uniform(draw) > float(p).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "lb/core/philox.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace lb::detail {

constexpr int kPhiloxLanes = 16;  // blocks computed together (one AVX-512 register per word)
constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // philox4x32_10's multipliers
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // and key increments

#if defined(__AVX512F__)
// hi:lo = a · m per 32-bit lane. GCC vectorizes the portable loop below with a 64 x 64-bit
// vpmullq on zero-extended halves (3 uops each on Intel); vpmuludq on the even and the odd
// lanes is one uop each.
inline void mul_hi_lo(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}
#endif

// out[4 l + w] = word w of block b0 + l, i.e. out[k] is draw number 4 b0 + k of the stream.
inline void philox_blocks(uint64_t b0, uint64_t subsequence, uint32_t key0, uint32_t key1,
                          uint32_t out[4 * kPhiloxLanes]) {
#if defined(__AVX512F__)
  static_assert(kPhiloxLanes == 16, "one zmm register per word");
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Counter b0 + l: the low word wraps past 2^32 where it ends below l, carrying into the high.
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0))), lane);
  const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, lane);
  const __m512i b0hi = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0 >> 32)));
  __m512i c1 = _mm512_mask_add_epi32(b0hi, carry, b0hi, _mm512_set1_epi32(1));
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence)));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(subsequence >> 32)));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(kM0));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(kM1));
  for (int r = 0; r < 10; ++r) {
    __m512i hi0, lo0, hi1, lo1;
    mul_hi_lo(c0, m0, hi0, lo0);
    mul_hi_lo(c2, m1, hi1, lo1);
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(key0)), k1 = _mm512_set1_epi32(static_cast<int>(key1));
    c0 = _mm512_ternarylogic_epi32(hi1, c1, k0, 0x96);  // hi1 ^ c1 ^ key0
    c2 = _mm512_ternarylogic_epi32(hi0, c3, k1, 0x96);  // hi0 ^ c3 ^ key1
    c1 = lo1;
    c3 = lo0;
    key0 += kW0;
    key1 += kW1;
  }
  // Interleave: 128-bit lane g of u_k is block 4 g + k (its four words), and the output's
  // 128-bit chunk l is block l.
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x44), v1 = _mm512_shuffle_i32x4(u2, u3, 0x44);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xEE), v3 = _mm512_shuffle_i32x4(u2, u3, 0xEE);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v0, v1, 0xDD));
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v2, v3, 0x88));
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));
#else
  uint32_t c0[kPhiloxLanes], c1[kPhiloxLanes], c2[kPhiloxLanes], c3[kPhiloxLanes];
  for (int l = 0; l < kPhiloxLanes; ++l) {
    const uint64_t b = b0 + static_cast<uint64_t>(l);
    c0[l] = static_cast<uint32_t>(b);
    c1[l] = static_cast<uint32_t>(b >> 32);
    c2[l] = static_cast<uint32_t>(subsequence);
    c3[l] = static_cast<uint32_t>(subsequence >> 32);
  }
  for (int r = 0; r < 10; ++r) {
#pragma omp simd
    for (int l = 0; l < kPhiloxLanes; ++l) {
      const uint64_t p0 = static_cast<uint64_t>(kM0) * c0[l];
      const uint64_t p1 = static_cast<uint64_t>(kM1) * c2[l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ key0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ key1;
      c1[l] = static_cast<uint32_t>(p1);
      c3[l] = static_cast<uint32_t>(p0);
      c0[l] = n0;
      c2[l] = n2;
    }
    key0 += kW0;
    key1 += kW1;
  }
  for (int l = 0; l < kPhiloxLanes; ++l) {
    out[4 * l] = c0[l];
    out[4 * l + 1] = c1[l];
    out[4 * l + 2] = c2[l];
    out[4 * l + 3] = c3[l];
  }
#endif
}

// keep[k] = 1 iff draw number o0 + k of the stream (seed, subsequence) keeps its element
// (uniform > p), for k in [0, n).
inline void dropout_keep_bytes(uint64_t seed, uint64_t subsequence, uint64_t o0, int64_t n,
                               float p, uint8_t* keep) {
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const uint64_t o1 = o0 + static_cast<uint64_t>(n);
  for (uint64_t b = o0 >> 2; 4 * b < o1; b += kPhiloxLanes) {
    uint32_t words[4 * kPhiloxLanes];
    philox_blocks(b, subsequence, key0, key1, words);
    // All 64 decisions (a fixed trip count: whole vectors, no scalar peel), then the ones asked for.
    uint8_t all[4 * kPhiloxLanes];
#pragma omp simd
    for (int k = 0; k < 4 * kPhiloxLanes; ++k) all[k] = philox_uniform(words[k]) > p;
    const uint64_t lo = std::max(o0, 4 * b), hi = std::min(o1, 4 * b + 4 * kPhiloxLanes);
    std::memcpy(keep + (lo - o0), all + (lo - 4 * b), static_cast<size_t>(hi - lo));
  }
}

// Bits e0 .. e0 + n - 1 of `bits` (bit e is bit e & 7 of byte e >> 3) |= keep[0 .. n) (each
// 0 or 1); the bits' bytes start at zero. Eight at a time where the bits fill a byte.
inline void or_keep_bits(uint8_t* bits, int64_t e0, const uint8_t* keep, int64_t n) {
  int64_t j = 0;
  for (; j < n && ((e0 + j) & 7) != 0; ++j) bits[(e0 + j) >> 3] |= static_cast<uint8_t>(keep[j] << ((e0 + j) & 7));
  for (; j + 8 <= n; j += 8) {
    uint64_t x;  // eight 0/1 bytes -> bit k = byte k
    std::memcpy(&x, keep + j, 8);
    bits[(e0 + j) >> 3] |= static_cast<uint8_t>((x * 0x0102040810204080ull) >> 56);
  }
  for (; j < n; ++j) bits[(e0 + j) >> 3] |= static_cast<uint8_t>(keep[j] << ((e0 + j) & 7));
}

// keep[0 .. n) = bits e0 .. e0 + n - 1 of `bits` as 0/1 bytes (or_keep_bits' inverse).
inline void unpack_keep_bits(const uint8_t* bits, int64_t e0, int64_t n, uint8_t* keep) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const int64_t e = e0 + j, sh = e & 7;
    uint32_t w = bits[e >> 3];
    if (sh != 0) w |= static_cast<uint32_t>(bits[(e >> 3) + 1]) << 8;  // bit e + 7 is there
    // The byte to every byte of x, byte k keeping bit k, each byte then to 0/1.
    uint64_t x = static_cast<uint64_t>((w >> sh) & 0xFF) * 0x0101010101010101ull;
    x &= 0x8040201008040201ull;
    x = ((x + 0x7F7F7F7F7F7F7F7Full) >> 7) & 0x0101010101010101ull;
    std::memcpy(keep + j, &x, 8);
  }
  for (; j < n; ++j) keep[j] = (bits[(e0 + j) >> 3] >> ((e0 + j) & 7)) & 1;
}

}  // namespace lb::detail
