// The AVX2 + FMA kernels of the CPU quantisation (quantize.h), chosen at run time by
// quantize.cpp where the CPU has AVX2 but not AVX-512 (e.g. AMD Zen 2/3). A port of
// quantize_avx512.cpp: the same float operations as the scalar references (quantize_ref.cpp)
// in the same order (the butterflies a+b / a-b by stage 1, 2, 4, 8; x·inv; max then min;
// floor or round-to-nearest-even; one compare against the draw), so their int8 outputs are
// bit-identical. How the AVX2 realisation differs:
//  - A 16-float block is two ymm (lanes 0-7, 8-15): stages 1, 2, 4 run inside each (permute,
//    add and subtract, blend), stage 8 between the two. The column transform works on 8
//    columns at a time (16 ymm for the block's rows).
//  - No mask registers: tails load with vmaskmovps (lanes from a compare against an index
//    vector) and store through vmaskmovps or a small stack buffer; int32 levels (already
//    clamped to ±qmax <= 127) narrow to bytes with packs.
//  - Philox runs 8 counters per register (vpmuludq on even and odd lanes, two xors in place of
//    ternarylogic); the draws come out in the same stream order as quant::philox_draw.
//  - Keeping keep.r of 16 outputs is two vpermps (one per half) and a blend on index bit 3.
//  - The im2col byte gather uses the shared scalar im2col_row_levels.
// TensorStats' f64 sums may differ from the reference in the last bits (f32 partial sums per
// vector lane); absmax and every int8 output are exact.
#include "src/cpu/quantize_kernels.h"

#if LB_QUANT_X86_64
#include <immintrin.h>
#include <omp.h>

#include "src/cpu/isa_target.h"

// GCC 12 warns inside its own intrinsic headers (_mm256_undefined_*: GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace lb::cpu {

using namespace quant_kernels;

namespace avx2 {
LB_ISA_BEGIN_AVX2
namespace {

// A 16-point block: lanes 0-7 and 8-15.
struct F16 {
  __m256 lo, hi;
};

// All-ones on the first n of 8 lanes (n clamped to [0, 8]).
inline __m256i lanes(int64_t n) {
  const int k = static_cast<int>(std::clamp<int64_t>(n, 0, 8));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

inline __m256 abs8(__m256 a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// One butterfly stage inside each 128/256-bit lane group: lanes with bit h clear get
// a[i] + a[i+h], their partners a[i] - a[i+h] (p = a with partners swapped).
template <int Blend>
inline __m256 butterfly(__m256 a, __m256 p) {
  return _mm256_blend_ps(_mm256_add_ps(a, p), _mm256_sub_ps(p, a), Blend);
}

inline __m256 stages124(__m256 a) {
  a = butterfly<0xAA>(a, _mm256_permute_ps(a, 0xB1));
  a = butterfly<0xCC>(a, _mm256_permute_ps(a, 0x4E));
  return butterfly<0xF0>(a, _mm256_permute2f128_ps(a, a, 0x01));
}

// In-register 16-point FWHT (the scalar's operations, stage by stage).
inline F16 fwht16_reg(F16 a) {
  const __m256 lo = stages124(a.lo), hi = stages124(a.hi);
  return {_mm256_add_ps(lo, hi), _mm256_sub_ps(lo, hi)};
}

// 16 floats at x (columns c0.. of a row with `cols` columns): full loads except the tail.
inline F16 load16(const float* x, int64_t c0, int64_t cols) {
  if (c0 + 16 <= cols) return {_mm256_loadu_ps(x + c0), _mm256_loadu_ps(x + c0 + 8)};
  return {_mm256_maskload_ps(x + c0, lanes(cols - c0)), _mm256_maskload_ps(x + c0 + 8, lanes(cols - c0 - 8))};
}

// n floats of `a` to dst (n <= 16).
inline void store_floats(float* dst, F16 a, int64_t n) {
  if (n >= 8) {
    _mm256_storeu_ps(dst, a.lo);
    if (n == 16) _mm256_storeu_ps(dst + 8, a.hi);
    else if (n > 8) _mm256_maskstore_ps(dst + 8, lanes(n - 8), a.hi);
  } else {
    _mm256_maskstore_ps(dst, lanes(n), a.lo);
  }
}

// The first n bytes of v to dst (n <= 16).
inline void store_bytes(int8_t* dst, __m128i v, int64_t n) {
  if (n >= 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), v);
  } else if (n == 8) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), v);
  } else {
    alignas(16) int8_t buf[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(buf), v);
    std::memcpy(dst, buf, static_cast<size_t>(n));
  }
}

// draws + offset, or null when there are no draws (deterministic rounding): pointer
// arithmetic on a null pointer is undefined even when the result is never read.
inline const uint32_t* draw_at(const uint32_t* draws, int64_t offset) { return draws ? draws + offset : nullptr; }

// 8 values -> 8 int32 levels in [-qmax, qmax] (draws: 8 words, stochastic only).
inline __m256i quant8(__m256 x, __m256 inv, __m256 qm, bool stochastic, const uint32_t* draws) {
  const __m256 v = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(x, inv), _mm256_sub_ps(_mm256_setzero_ps(), qm)), qm);
  if (!stochastic) return _mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  const __m256 fl = _mm256_floor_ps(v);
  const __m256 frac = _mm256_sub_ps(v, fl);
  const __m256i u = _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(draws)), 8);
  const __m256 r = _mm256_mul_ps(_mm256_cvtepi32_ps(u), _mm256_set1_ps(5.9604644775390625e-8f));
  const __m256i up = _mm256_castps_si256(_mm256_cmp_ps(r, frac, _CMP_LT_OQ));  // -1 where rounding up
  return _mm256_sub_epi32(_mm256_cvttps_epi32(fl), up);
}

// 8 levels -> bytes 0-7 (saturating packs are exact: |level| <= 127).
inline __m128i narrow8(__m256i a) {
  const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return _mm_packs_epi16(w, w);
}

// 16 levels (lanes 0-7, 8-15) -> 16 bytes. The 256-bit pack interleaves the halves by 4.
inline __m128i narrow16(__m256i lo, __m256i hi) {
  const __m256i w = _mm256_packs_epi32(lo, hi);  // lo0-3 hi0-3 | lo4-7 hi4-7
  const __m128i b = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
  return _mm_shuffle_epi32(b, _MM_SHUFFLE(3, 1, 2, 0));
}

inline __m128i quant16(F16 x, __m256 inv, __m256 qm, bool stochastic, const uint32_t* draws) {
  return narrow16(quant8(x.lo, inv, qm, stochastic, draws), quant8(x.hi, inv, qm, stochastic, draw_at(draws, 8)));
}

// 32x32 -> 64-bit products of 8 lanes by a constant: high and low words.
inline void mul_hilo_epu32(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

// Philox4x32-10 on G·8 counters at once (group g, lane j: block b0 + 8g + j); out: G·32
// words in stream order. The G groups are independent chains: one alone is latency-bound.
template <int G>
inline void philox_groups(const PhiloxKey& k, uint64_t b0, uint32_t* out) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0[G], c1[G], c2[G], c3[G];
  for (int g = 0; g < G; ++g) {
    const uint64_t bg = b0 + 8 * static_cast<uint64_t>(g);
    c0[g] = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(bg))), lane);
    c1[g] = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(bg >> 32)));
    if (static_cast<uint32_t>(bg) > 0xFFFFFFFFu - 7u) {  // the low word wraps inside the group
      alignas(32) uint32_t hi[8];
      for (int j = 0; j < 8; ++j) hi[j] = static_cast<uint32_t>((bg + j) >> 32);
      c1[g] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
    }
    c2[g] = _mm256_set1_epi32(static_cast<int>(k.sub0));
    c3[g] = _mm256_set1_epi32(static_cast<int>(k.sub1));
  }
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t key0 = k.key0, key1 = k.key1;
  for (int r = 0; r < 10; ++r) {
    const __m256i k0 = _mm256_set1_epi32(static_cast<int>(key0)), k1 = _mm256_set1_epi32(static_cast<int>(key1));
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      __m256i hi0, lo0, hi1, lo1;
      mul_hilo_epu32(c0[g], m0, hi0, lo0);
      mul_hilo_epu32(c2[g], m1, hi1, lo1);
      c0[g] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[g]), k0);
      c1[g] = lo1;
      c2[g] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[g]), k1);
      c3[g] = lo0;
    }
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  for (int g = 0; g < G; ++g) {
    // (4 words x 8 blocks) -> stream order: block j's words at o[4j .. 4j+3].
    __m256i* o = reinterpret_cast<__m256i*>(out + 32 * g);
    const __m256i t0 = _mm256_unpacklo_epi32(c0[g], c1[g]), t1 = _mm256_unpackhi_epi32(c0[g], c1[g]);
    const __m256i t2 = _mm256_unpacklo_epi32(c2[g], c3[g]), t3 = _mm256_unpackhi_epi32(c2[g], c3[g]);
    // u_w: block w in the low 128 bits, block w + 4 in the high.
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256(o, _mm256_permute2x128_si256(u0, u1, 0x20));      // blocks 0, 1
    _mm256_storeu_si256(o + 1, _mm256_permute2x128_si256(u2, u3, 0x20));  // blocks 2, 3
    _mm256_storeu_si256(o + 2, _mm256_permute2x128_si256(u0, u1, 0x31));  // blocks 4, 5
    _mm256_storeu_si256(o + 3, _mm256_permute2x128_si256(u2, u3, 0x31));  // blocks 6, 7
  }
}

void philox_fill(const PhiloxKey& k, uint64_t e0, int64_t n, uint32_t* out) {
  int64_t i = 0;
  while (i < n && ((e0 + static_cast<uint64_t>(i)) & 3)) {  // up to the next block boundary
    out[i] = quant::philox_draw(k, e0 + static_cast<uint64_t>(i));
    ++i;
  }
  for (; i + 128 <= n; i += 128) philox_groups<4>(k, (e0 + static_cast<uint64_t>(i)) >> 2, out + i);
  for (; i + 32 <= n; i += 32) philox_groups<1>(k, (e0 + static_cast<uint64_t>(i)) >> 2, out + i);
  if (i < n) {
    alignas(32) uint32_t buf[32];
    philox_groups<1>(k, (e0 + static_cast<uint64_t>(i)) >> 2, buf);
    std::memcpy(out + i, buf, static_cast<size_t>(n - i) * sizeof(uint32_t));
  }
}

// ---- per-row and per-block workers (the public kernels and the fused pass loop over them) ----
// The OpenMP loops below call these per row / block / chunk and hold no vector type
// themselves: clang does not give OpenMP's outlined bodies the region's target attribute.

inline float transformed_row_absmax(const float* xr, int64_t cols) {
  __m256 mv = _mm256_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const F16 a = fwht16_reg(load16(xr, c0, cols));
    mv = _mm256_max_ps(mv, _mm256_max_ps(abs8(a.lo), abs8(a.hi)));
  }
  return hmax8(mv);
}

// Row r of the rows transform, quantised with `inv` (draws: c16 words of scratch).
void row_quantize(const float* xr, int64_t r, int64_t cols, float inv, const QuantParams& p, int8_t* q,
                  uint32_t* draws) {
  const int64_t c16 = round_up16(cols);
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax)), iv = _mm256_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0),
                     quant16(fwht16_reg(load16(xr, c0, cols)), iv, qm, p.stochastic, draw_at(draws, c0)));
}

// Row r with its own scale: transform into t (c16 floats), absmax, quantise from t.
float row_quantize_own_scale(const float* xr, int64_t r, int64_t cols, const QuantParams& p, int8_t* q, float* t,
                             uint32_t* draws) {
  const int64_t c16 = round_up16(cols);
  __m256 mv = _mm256_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const F16 a = fwht16_reg(load16(xr, c0, cols));
    _mm256_storeu_ps(t + c0, a.lo);
    _mm256_storeu_ps(t + c0 + 8, a.hi);
    mv = _mm256_max_ps(mv, _mm256_max_ps(abs8(a.lo), abs8(a.hi)));
  }
  const float m = hmax8(mv);
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax));
  const __m256 iv = _mm256_set1_ps(quant::inv_scale_from_absmax(m, p.qmax));
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const F16 a{_mm256_loadu_ps(t + c0), _mm256_loadu_ps(t + c0 + 8)};
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0), quant16(a, iv, qm, p.stochastic, draw_at(draws, c0)));
  }
  return m;
}

void row_transform(const float* xr, int64_t cols, float* yr) {
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const F16 a = fwht16_reg(load16(xr, c0, cols));
    _mm256_storeu_ps(yr + c0, a.lo);
    _mm256_storeu_ps(yr + c0 + 8, a.hi);
  }
}

// The column transform of one 16-row block at the n <= 8 columns [c0, c0 + n): t[j] = kept
// output j.
inline void cols_block(const float* x, int64_t rows, int64_t ldx, int64_t b, int64_t c0, int64_t n,
                       const HadamardKeep& keep, __m256* t) {
  const __m256i mask = lanes(n);
  __m256 v[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    const int64_t row = 16 * b + i;
    if (row >= rows)
      v[i] = _mm256_setzero_ps();
    else
      v[i] = n >= 8 ? _mm256_loadu_ps(x + row * ldx + c0) : _mm256_maskload_ps(x + row * ldx + c0, mask);
  }
#pragma GCC unroll 4
  for (int h = 1; h < 16; h <<= 1)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (!(i & h)) {
        const __m256 u = v[i], w = v[i + h];
        v[i] = _mm256_add_ps(u, w);
        v[i + h] = _mm256_sub_ps(u, w);
      }
  for (int j = 0; j < keep.r; ++j) t[j] = v[keep.idx[j]];
}

// Block b's statistics (count left 0); the sums only when asked.
TensorStats cols_block_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx, int64_t b,
                            const HadamardKeep& keep, bool sums) {
  __m256 mv = _mm256_setzero_ps(), sq = _mm256_setzero_ps(), ab = _mm256_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    __m256 t[16];
    cols_block(x, rows, ldx, b, c0, cols - c0, keep, t);  // tail lanes are zeros
    for (int j = 0; j < keep.r; ++j) {
      const __m256 a = abs8(t[j]);
      mv = _mm256_max_ps(mv, a);
      if (sums) {
        sq = _mm256_fmadd_ps(t[j], t[j], sq);
        ab = _mm256_add_ps(ab, a);
      }
    }
  }
  return {hmax8(mv), sums ? hsum8(sq) : 0.0, sums ? hsum8(ab) : 0.0};
}

// Block b's r output rows (draws: r·cols + 16 words of scratch).
void cols_block_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, int64_t b,
                         const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q, uint32_t* draws) {
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax)), iv = _mm256_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(b * keep.r * cols), keep.r * cols, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const int64_t n = std::min<int64_t>(8, cols - c0);
    __m256 t[16];
    cols_block(x, rows, ldx, b, c0, n, keep, t);
    for (int j = 0; j < keep.r; ++j)
      store_bytes(q + (b * keep.r + j) * cols + c0,
                  narrow8(quant8(t[j], iv, qm, p.stochastic, draw_at(draws, j * cols + c0))), n);
  }
}

void cols_block_transform(const float* x, int64_t rows, int64_t cols, int64_t ldx, int64_t b,
                          const HadamardKeep& keep, float* y) {
  for (int64_t c0 = 0; c0 < cols; c0 += 8) {
    const int64_t n = std::min<int64_t>(8, cols - c0);
    __m256 t[16];
    cols_block(x, rows, ldx, b, c0, n, keep, t);
    for (int j = 0; j < keep.r; ++j) {
      float* dst = y + (b * keep.r + j) * cols + c0;
      if (n == 8) _mm256_storeu_ps(dst, t[j]);
      else _mm256_maskstore_ps(dst, lanes(n), t[j]);
    }
  }
}

float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* row_absmax) {
  float m = 0.f;
#pragma omp parallel for reduction(max : m) if (rows * cols > kParallelWork) schedule(dynamic, 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float rm = transformed_row_absmax(x + r * ldx, cols);
    if (row_absmax) row_absmax[r] = rm;
    m = std::max(m, rm);
  }
  return m;
}

void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, const float* row_inv, float inv,
                          const QuantParams& p, int8_t* q) {
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(round_up16(cols)) : 0);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r)
      row_quantize(x + r * ldx, r, cols, row_inv ? row_inv[r] : inv, p, q, draws.data());
  }
}

void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx, const QuantParams& p,
                                  int8_t* q, float* row_scale) {
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(round_up16(cols)) : 0);
    std::vector<float> t(static_cast<size_t>(round_up16(cols)));  // the transformed row (L1)
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r)
      row_scale[r] = quant::scale_from_absmax(
          row_quantize_own_scale(x + r * ldx, r, cols, p, q, t.data(), draws.data()), p.qmax);
  }
}

void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  const int64_t c16 = round_up16(cols);
#pragma omp parallel for if (rows * cols > kParallelWork) schedule(static)
  for (int64_t r = 0; r < rows; ++r) row_transform(x + r * ldx, cols, y + r * c16);
}

// Picks the kept outputs of a transformed block: output lane j (< keep.r) = lane keep.idx[j].
// vpermps indexes within one ymm (its low 3 bits), so each output half permutes both input
// halves and blends on bit 3 of the index.
struct KeepPick {
  __m256i idx_lo, idx_hi;     // source lanes of outputs 0-7 and 8-15
  __m256 upper_lo, upper_hi;  // sign bit set where the source is lane 8-15
  __m256 kept_lo, kept_hi;    // all-ones on outputs j < keep.r
  int r;
};

KeepPick keep_pick(const HadamardKeep& keep) {
  alignas(32) int32_t idx[16];
  for (int j = 0; j < 16; ++j) idx[j] = j < keep.r ? keep.idx[j] : 0;
  KeepPick k;
  k.idx_lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx));
  k.idx_hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(idx + 8));
  k.upper_lo = _mm256_castsi256_ps(_mm256_slli_epi32(k.idx_lo, 28));
  k.upper_hi = _mm256_castsi256_ps(_mm256_slli_epi32(k.idx_hi, 28));
  k.kept_lo = _mm256_castsi256_ps(lanes(keep.r));
  k.kept_hi = _mm256_castsi256_ps(lanes(keep.r - 8));
  k.r = keep.r;
  return k;
}

inline __m256 pick8(F16 a, __m256i idx, __m256 upper) {
  return _mm256_blendv_ps(_mm256_permutevar8x32_ps(a.lo, idx), _mm256_permutevar8x32_ps(a.hi, idx), upper);
}

// The kept outputs of 16-block a (lanes >= keep.r unspecified; the upper half only if r > 8).
inline F16 pick_kept(F16 a, const KeepPick& k) {
  return {pick8(a, k.idx_lo, k.upper_lo), k.r > 8 ? pick8(a, k.idx_hi, k.upper_hi) : _mm256_setzero_ps()};
}

// Running max of |kept lanes|.
inline __m256 max_kept(__m256 mv, F16 a, const KeepPick& k) {
  mv = _mm256_max_ps(mv, _mm256_and_ps(abs8(a.lo), k.kept_lo));
  return k.r > 8 ? _mm256_max_ps(mv, _mm256_and_ps(abs8(a.hi), k.kept_hi)) : mv;
}

// The kept outputs of a, quantised, to dst[0 .. r) (draws: r words, stochastic only).
inline void quantize_kept(F16 a, const KeepPick& k, __m256 iv, __m256 qm, const QuantParams& p,
                          const uint32_t* draws, int8_t* dst) {
  const __m256i lo = quant8(a.lo, iv, qm, p.stochastic, draws);
  const __m128i bytes = k.r > 8 ? narrow16(lo, quant8(a.hi, iv, qm, p.stochastic, draw_at(draws, 8))) : narrow8(lo);
  store_bytes(dst, bytes, k.r);
}

float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep) {
  const KeepPick kp = keep_pick(keep);
  __m256 mv = _mm256_setzero_ps();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      mv = max_kept(mv, pick_kept(fwht16_reg(load16(x + r * ldx, c0, cols)), kp), kp);
  return hmax8(mv);
}

void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                               float inv, const QuantParams& p, int8_t* q, int64_t ldq) {
  const KeepPick kp = keep_pick(keep);
  const int64_t width = (cols + 15) / 16 * keep.r;
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax)), iv = _mm256_set1_ps(inv);
  std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(width + 16) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * width), width, draws.data());
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t oc = c0 / 16 * keep.r;
      const F16 a = pick_kept(fwht16_reg(load16(x + r * ldx, c0, cols)), kp);
      quantize_kept(a, kp, iv, qm, p, draw_at(draws.data(), oc), q + r * ldq + oc);
    }
  }
}

// Bytes src[0 .. n) as a 16-block of floats times s, zeros past n (src readable for 16 bytes).
inline F16 dequantize16(const int8_t* src, int64_t n, __m256 s) {
  __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  if (n < 16) {
    const __m128i iota = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    bytes = _mm_and_si128(bytes, _mm_cmpgt_epi8(_mm_set1_epi8(static_cast<char>(n)), iota));
  }
  const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
  const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_unpackhi_epi64(bytes, bytes)));
  return {_mm256_mul_ps(lo, s), _mm256_mul_ps(hi, s)};
}

// Calls f(i, b, a) with a = the kept outputs (pick_kept) of 16-block b of im2col row i. The
// levels are gathered by byte copies first (the shared scalar im2col_row_levels: a vector
// gather is not worth it here). With stride 1 along H, the rows (c, i, j) of one (c, j) are
// consecutive slices of one plane (the padded rows of channel c read at tap j), so that plane
// is built once for the kH rows; otherwise each row is gathered on its own.
template <typename F>
void for_each_im2col_block(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                           const Conv2dArgs& a, const KeepPick& kp, F&& f) {
  const int64_t Ho = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]);
  const int64_t Wo = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]), L = Ho * Wo;
  const int64_t blocks = (L + 15) / 16;
  const bool shared_plane = a.stride[0] == 1;
  const int64_t plane_rows = shared_plane ? H + 2 * a.padding[0] : Ho;  // padded rows -ph .. H+ph-1
  const __m256 sv = _mm256_set1_ps(s);
  std::vector<int8_t> levels(static_cast<size_t>(plane_rows * Wo + 16), 0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < kW; ++j) {
      // plane row p is input row p - ph: im2col_row_levels' row for tap (0, j), stride 1
      if (shared_plane) im2col_row_levels(q + c * H * W, H, W, plane_rows, Wo, 0, j, a, levels.data());
      for (int64_t i = 0; i < kH; ++i) {
        const int8_t* src = levels.data();
        if (shared_plane)
          src += i * a.dilation[0] * Wo;
        else
          im2col_row_levels(q + c * H * W, H, W, Ho, Wo, i, j, a, levels.data());
        const int64_t row = (c * kH + i) * kW + j;
        for (int64_t b = 0; b < blocks; ++b)
          f(row, b, pick_kept(fwht16_reg(dequantize16(src + 16 * b, L - 16 * b, sv)), kp));
      }
    }
}

float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                        const Conv2dArgs& a, const HadamardKeep& keep) {
  const KeepPick kp = keep_pick(keep);
  __m256 mv = _mm256_setzero_ps();
  for_each_im2col_block(q, s, C, H, W, kH, kW, a, kp, [&](int64_t, int64_t, F16 v) { mv = max_kept(mv, v, kp); });
  return hmax8(mv);
}

void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                         const Conv2dArgs& a, const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* out,
                         int64_t ldq) {
  const KeepPick kp = keep_pick(keep);
  const int64_t L = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]) *
                    conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]);
  const int64_t width = (L + 15) / 16 * keep.r;
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax)), iv = _mm256_set1_ps(inv);
  std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(width + 16) : 0);
  int64_t last_row = -1;
  for_each_im2col_block(q, s, C, H, W, kH, kW, a, kp, [&](int64_t row, int64_t b, F16 v) {
    if (p.stochastic && row != last_row) {
      philox_fill(p.key, static_cast<uint64_t>(row * width), width, draws.data());
      last_row = row;
    }
    quantize_kept(v, kp, iv, qm, p, draw_at(draws.data(), b * keep.r), out + row * ldq + b * keep.r);
  });
}

float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& a, const HadamardKeep& keep, float* table) {
  const int64_t WB = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) / 16;
  const std::vector<char> read = input_rows_read(H, kH, a);
  const KeepPick kp = keep_pick(keep);
  const __m256 sv = _mm256_set1_ps(s);
  __m256 mv = _mm256_setzero_ps();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t ih = 0; ih < H; ++ih) {
        float* e = table + ((c * kW + j) * H + ih) * WB * keep.r;
        if (!read[static_cast<size_t>(ih)]) {
          std::memset(e, 0, static_cast<size_t>(WB * keep.r) * sizeof(float));
          continue;
        }
        const int8_t* src = q + (c * H + ih) * W;
        for (int64_t wb = 0; wb < WB; ++wb) {
          // lanes t read input column iw0 + t; those in the padding are zeros
          const int64_t iw0 = wb * 16 - a.padding[1] + j * a.dilation[1];
          const int64_t lo = std::max<int64_t>(0, -iw0), hi = std::min<int64_t>(16, W - iw0);
          alignas(16) int8_t edge[16] = {};
          const int8_t* bytes = edge;
          if (lo == 0 && hi == 16)
            bytes = src + iw0;
          else if (hi > lo)  // at an edge: copy the columns inside the image
            std::memcpy(edge + lo, src + iw0 + lo, static_cast<size_t>(hi - lo));
          const F16 t = pick_kept(fwht16_reg(dequantize16(bytes, 16, sv)), kp);
          mv = max_kept(mv, t, kp);
          store_floats(e + wb * keep.r, t, keep.r);
        }
      }
  return hmax8(mv);
}

void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                               const Conv2dArgs& a, const HadamardKeep& keep, float inv, int qmax, int8_t* out,
                               int64_t ldq) {
  const int64_t n = hla_im2col_table_size(C, H, W, kW, a, keep);
  std::vector<int8_t> qt(static_cast<size_t>(n));
  const __m256 qm = _mm256_set1_ps(static_cast<float>(qmax)), iv = _mm256_set1_ps(inv);
  for (int64_t e = 0; e < n; e += 16)
    store_bytes(qt.data() + e, quant16(load16(table, e, n), iv, qm, false, nullptr), n - e);
  expand_table_rows(qt.data(), C, H, W, kH, kW, a, keep.r, out, ldq);
}

TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep) {
  const int64_t blocks = (rows + 15) / 16;
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (rows * cols > kParallelWork) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const TensorStats bs = cols_block_stats(x, rows, cols, ldx, b, keep, true);
    m = std::max(m, bs.absmax);
    ssq += bs.sum_sq;
    sab += bs.sum_abs;
  }
  return {m, ssq, sab, blocks * keep.r * cols};
}

void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                          float inv, const QuantParams& p, int8_t* q) {
  const int64_t blocks = (rows + 15) / 16;
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(keep.r * cols + 16) : 0);
#pragma omp for schedule(dynamic, 16)
    for (int64_t b = 0; b < blocks; ++b) cols_block_quantize(x, rows, cols, ldx, b, keep, inv, p, q, draws.data());
  }
}

void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep, float* y) {
  const int64_t blocks = (rows + 15) / 16;
#pragma omp parallel for if (rows * cols > kParallelWork) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) cols_block_transform(x, rows, cols, ldx, b, keep, y);
}

DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, const QuantParams& prow,
                                bool per_row, int8_t* q_rows, float* row_scale, const HadamardKeep& keep,
                                const QuantParams& pcol, int8_t* q_cols) {
  const int64_t blocks = (rows + 15) / 16, c16 = round_up16(cols);
  float rmax = 0.f, cmax = 0.f;
  // Pass 1 over x, one 16-row block (L2-resident) at a time: the rows' absmax (or, per row,
  // their whole quantisation) and the block's column-transform absmax.
#pragma omp parallel reduction(max : rmax, cmax) if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(prow.stochastic && per_row ? static_cast<size_t>(c16) : 0);
    std::vector<float> t(per_row ? static_cast<size_t>(c16) : 0);
#pragma omp for schedule(dynamic, 4)
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t r = 16 * b; r < std::min(rows, 16 * b + 16); ++r) {
        if (per_row) {
          const float m = row_quantize_own_scale(x + r * ldx, r, cols, prow, q_rows, t.data(), draws.data());
          row_scale[r] = quant::scale_from_absmax(m, prow.qmax);
        } else {
          rmax = std::max(rmax, transformed_row_absmax(x + r * ldx, cols));
        }
      }
      cmax = std::max(cmax, cols_block_stats(x, rows, cols, ldx, b, keep, false).absmax);
    }
  }
  DualScales s;
  s.rows = per_row ? 0.f : quant::scale_from_absmax(rmax, prow.qmax);
  s.cols = quant::scale_from_absmax(cmax, pcol.qmax);
  const float rinv = quant::inv_scale_from_absmax(rmax, prow.qmax);
  const float cinv = quant::inv_scale_from_absmax(cmax, pcol.qmax);
  // Pass 2: quantise both (the rows only when they share one scale).
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> rdraws(prow.stochastic && !per_row ? static_cast<size_t>(c16) : 0);
    std::vector<uint32_t> cdraws(pcol.stochastic ? static_cast<size_t>(keep.r * cols + 16) : 0);
#pragma omp for schedule(dynamic, 4)
    for (int64_t b = 0; b < blocks; ++b) {
      if (!per_row)
        for (int64_t r = 16 * b; r < std::min(rows, 16 * b + 16); ++r)
          row_quantize(x + r * ldx, r, cols, rinv, prow, q_rows, rdraws.data());
      cols_block_quantize(x, rows, cols, ldx, b, keep, cinv, pcol, q_cols, cdraws.data());
    }
  }
  return s;
}

// One chunk's statistics (f32 partial sums per lane; count left 0).
TensorStats stats_chunk(const float* x, int64_t i0, int64_t i1) {
  __m256 mv = _mm256_setzero_ps(), sq = _mm256_setzero_ps(), ab = _mm256_setzero_ps();
  for (int64_t i = i0; i < i1; i += 8) {
    const __m256 v = i + 8 <= i1 ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, lanes(i1 - i));
    const __m256 a = abs8(v);
    mv = _mm256_max_ps(mv, a);
    sq = _mm256_fmadd_ps(v, v, sq);
    ab = _mm256_add_ps(ab, a);
  }
  return {hmax8(mv), hsum8(sq), hsum8(ab)};
}

TensorStats tensor_stats(const float* x, int64_t n) {
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
  const int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (n > kParallelWork) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const TensorStats c = stats_chunk(x, ch * 4096, std::min(n, (ch + 1) * 4096));
    m = std::max(m, c.absmax);
    ssq += c.sum_sq;
    sab += c.sum_abs;
  }
  return {m, ssq, sab, n};
}

void quantize_chunk(const float* x, int64_t i0, int64_t i1, float inv, const QuantParams& p, int8_t* q,
                    uint32_t* draws) {
  const __m256 qm = _mm256_set1_ps(static_cast<float>(p.qmax)), iv = _mm256_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(i0), i1 - i0, draws);
  for (int64_t i = i0; i < i1; i += 16)
    store_bytes(q + i, quant16(load16(x, i, i1), iv, qm, p.stochastic, draw_at(draws, i - i0)), i1 - i);
}

void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  const int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel if (n > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? 4096 + 16 : 0);
#pragma omp for schedule(dynamic, 4)
    for (int64_t ch = 0; ch < chunks; ++ch)
      quantize_chunk(x, ch * 4096, std::min(n, ch * 4096 + 4096), inv, p, q, draws.data());
  }
}

}  // namespace
LB_ISA_END
}  // namespace avx2

const QuantizeImpl kQuantizeAvx2{
    avx2::philox_fill,
    avx2::fwht16_rows_absmax,
    avx2::fwht16_rows_quantize,
    avx2::fwht16_rows_quantize_per_row,
    avx2::fwht16_rows,
    avx2::fwht16_rows_keep_absmax,
    avx2::fwht16_rows_keep_quantize,
    avx2::hla_im2col_absmax,
    avx2::hla_im2col_quantize,
    avx2::hla_im2col_table,
    avx2::hla_im2col_table_quantize,
    avx2::fwht16_cols_stats,
    avx2::fwht16_cols_quantize,
    avx2::fwht16_cols,
    avx2::fwht16_dual_quantize,
    avx2::tensor_stats,
    avx2::quantize};

}  // namespace lb::cpu

#endif  // LB_QUANT_X86_64
