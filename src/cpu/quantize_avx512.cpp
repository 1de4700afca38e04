// The AVX-512 kernels of the CPU quantisation (quantize.h), chosen at run time by
// quantize.cpp where the CPU has AVX-512. They perform exactly the scalar references' float
// operations (quantize_ref.cpp) in the same order (the butterflies a+b / a-b by stage 1, 2, 4,
// 8; x·inv; max then min; floor or rint; one compare against the draw), so their int8 outputs
// are bit-identical. Compiled for AVX-512 whatever the build's -march (isa_target.h).
#include "src/cpu/quantize_kernels.h"

#if LB_QUANT_X86_64
#include <immintrin.h>
#include <omp.h>

#include "src/cpu/isa_target.h"

// GCC 12 warns inside its own intrinsic headers (_mm512_undefined_*: GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace lb::cpu {

using namespace quant_kernels;

namespace avx512 {
LB_ISA_BEGIN_AVX512
namespace {
namespace {

inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// In-register 16-point FWHT: lane i with bit h clear gets a[i] + a[i+h], its partner
// a[i] - a[i+h] (one add and one masked subtract per stage: the scalar's operations).
inline __m512 fwht16_reg(__m512 a) {
  __m512 p = _mm512_permute_ps(a, 0xB1);
  a = _mm512_mask_sub_ps(_mm512_add_ps(a, p), 0xAAAA, p, a);
  p = _mm512_permute_ps(a, 0x4E);
  a = _mm512_mask_sub_ps(_mm512_add_ps(a, p), 0xCCCC, p, a);
  p = _mm512_shuffle_f32x4(a, a, 0xB1);
  a = _mm512_mask_sub_ps(_mm512_add_ps(a, p), 0xF0F0, p, a);
  p = _mm512_shuffle_f32x4(a, a, 0x4E);
  a = _mm512_mask_sub_ps(_mm512_add_ps(a, p), 0xFF00, p, a);
  return a;
}

// 16 floats at x (columns c0.. of a row with `cols` columns): full loads except the tail.
inline __m512 load16(const float* x, int64_t c0, int64_t cols) {
  return c0 + 16 <= cols ? _mm512_loadu_ps(x + c0) : _mm512_maskz_loadu_ps(tail_mask(cols - c0), x + c0);
}

// draws + offset, or null when there are no draws (deterministic rounding): pointer
// arithmetic on a null pointer is undefined even when the result is never read.
inline const uint32_t* draw_at(const uint32_t* draws, int64_t offset) { return draws ? draws + offset : nullptr; }

// 16 values -> 16 int8 levels (draws: 16 words, stochastic only).
inline __m128i quant16(__m512 x, __m512 inv, __m512 qm, bool stochastic, const uint32_t* draws) {
  const __m512 v = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x, inv), _mm512_sub_ps(_mm512_setzero_ps(), qm)), qm);
  __m512i qi;
  if (stochastic) {
    const __m512 fl = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_sub_ps(v, fl);
    const __m512i u = _mm512_srli_epi32(_mm512_loadu_si512(draws), 8);
    const __m512 r = _mm512_mul_ps(_mm512_cvtepi32_ps(u), _mm512_set1_ps(5.9604644775390625e-8f));
    const __mmask16 up = _mm512_cmp_ps_mask(r, frac, _CMP_LT_OQ);
    qi = _mm512_cvttps_epi32(fl);
    qi = _mm512_mask_add_epi32(qi, up, qi, _mm512_set1_epi32(1));
  } else {
    qi = _mm512_cvttps_epi32(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  return _mm512_cvtepi32_epi8(qi);
}

// 32x32 -> 64-bit products of 16 lanes by a constant: high and low words (vpmuludq on even
// and odd lanes; cheaper than vpmulld for the low half).
inline void mul_hilo_epu32(__m512i a, __m512i m, __m512i& hi, __m512i& lo) {
  const __m512i even = _mm512_mul_epu32(a, m);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(even, 32), odd);
  lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
}

// Philox4x32-10 on G·16 counters at once (group g, lane j: block b0 + 16g + j); out: G·64
// words in stream order. The G groups are independent chains: one alone is latency-bound.
template <int G>
inline void philox_groups(const PhiloxKey& k, uint64_t b0, uint32_t* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c0[G], c1[G], c2[G], c3[G];
  for (int g = 0; g < G; ++g) {
    const uint64_t bg = b0 + 16 * static_cast<uint64_t>(g);
    c0[g] = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(bg))), lane);
    c1[g] = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(bg >> 32)));
    if (static_cast<uint32_t>(bg) > 0xFFFFFFFFu - 15u) {  // the low word wraps inside the group
      alignas(64) uint32_t hi[16];
      for (int j = 0; j < 16; ++j) hi[j] = static_cast<uint32_t>((bg + j) >> 32);
      c1[g] = _mm512_load_si512(hi);
    }
    c2[g] = _mm512_set1_epi32(static_cast<int>(k.sub0));
    c3[g] = _mm512_set1_epi32(static_cast<int>(k.sub1));
  }
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t key0 = k.key0, key1 = k.key1;
  for (int r = 0; r < 10; ++r) {
    const __m512i k0 = _mm512_set1_epi32(static_cast<int>(key0)), k1 = _mm512_set1_epi32(static_cast<int>(key1));
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      __m512i hi0, lo0, hi1, lo1;
      mul_hilo_epu32(c0[g], m0, hi0, lo0);
      mul_hilo_epu32(c2[g], m1, hi1, lo1);
      c0[g] = _mm512_ternarylogic_epi32(hi1, c1[g], k0, 0x96);
      c1[g] = lo1;
      c2[g] = _mm512_ternarylogic_epi32(hi0, c3[g], k1, 0x96);
      c3[g] = lo0;
    }
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  for (int g = 0; g < G; ++g) {
    // (4 words x 16 blocks) -> stream order: block j's words at o[4j .. 4j+3].
    uint32_t* o = out + 64 * g;
    const __m512i t0 = _mm512_unpacklo_epi32(c0[g], c1[g]), t1 = _mm512_unpackhi_epi32(c0[g], c1[g]);
    const __m512i t2 = _mm512_unpacklo_epi32(c2[g], c3[g]), t3 = _mm512_unpackhi_epi32(c2[g], c3[g]);
    const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
    const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
    // u_w lane l holds block 4l + w.
    const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x88), v1 = _mm512_shuffle_i32x4(u2, u3, 0x88);
    const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xDD), v3 = _mm512_shuffle_i32x4(u2, u3, 0xDD);
    _mm512_storeu_si512(o, _mm512_shuffle_i32x4(v0, v1, 0x88));       // blocks 0..3
    _mm512_storeu_si512(o + 16, _mm512_shuffle_i32x4(v2, v3, 0x88));  // blocks 4..7
    _mm512_storeu_si512(o + 32, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // blocks 8..11
    _mm512_storeu_si512(o + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // blocks 12..15
  }
}

// Serial loop over rows unless the work is large (then OpenMP, static schedule).
template <typename F>
void parallel_rows(int64_t n, int64_t work, F&& f) {
#pragma omp parallel for if (work > kParallelWork) schedule(static)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace

void philox_fill(const PhiloxKey& k, uint64_t e0, int64_t n, uint32_t* out) {
  int64_t i = 0;
  while (i < n && ((e0 + static_cast<uint64_t>(i)) & 3)) {  // up to the next block boundary
    out[i] = quant::philox_draw(k, e0 + static_cast<uint64_t>(i));
    ++i;
  }
  for (; i + 256 <= n; i += 256) philox_groups<4>(k, (e0 + static_cast<uint64_t>(i)) >> 2, out + i);
  for (; i + 64 <= n; i += 64) philox_groups<1>(k, (e0 + static_cast<uint64_t>(i)) >> 2, out + i);
  if (i < n) {
    alignas(64) uint32_t buf[64];
    philox_groups<1>(k, (e0 + static_cast<uint64_t>(i)) >> 2, buf);
    std::memcpy(out + i, buf, static_cast<size_t>(n - i) * sizeof(uint32_t));
  }
}

namespace {
// ---- per-row and per-block workers (the public kernels and the fused pass loop over them) ----

inline float transformed_row_absmax(const float* xr, int64_t cols) {
  __m512 mv = _mm512_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 16)
    mv = _mm512_max_ps(mv, _mm512_abs_ps(fwht16_reg(load16(xr, c0, cols))));
  return _mm512_reduce_max_ps(mv);
}

// Row r of the rows transform, quantised with `inv` (draws: c16 words of scratch).
inline void row_quantize(const float* xr, int64_t r, int64_t cols, float inv, const QuantParams& p,
                         int8_t* q, uint32_t* draws) {
  const int64_t c16 = round_up16(cols);
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __m512 a = fwht16_reg(load16(xr, c0, cols));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0), quant16(a, iv, qm, p.stochastic, draw_at(draws, c0)));
  }
}

// Row r with its own scale: transform into t (c16 floats), absmax, quantise from t.
inline float row_quantize_own_scale(const float* xr, int64_t r, int64_t cols, const QuantParams& p,
                                    int8_t* q, float* t, uint32_t* draws) {
  const int64_t c16 = round_up16(cols);
  __m512 mv = _mm512_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __m512 a = fwht16_reg(load16(xr, c0, cols));
    _mm512_storeu_ps(t + c0, a);
    mv = _mm512_max_ps(mv, _mm512_abs_ps(a));
  }
  const float m = _mm512_reduce_max_ps(mv);
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax));
  const __m512 iv = _mm512_set1_ps(quant::inv_scale_from_absmax(m, p.qmax));
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0),
                     quant16(_mm512_loadu_ps(t + c0), iv, qm, p.stochastic, draw_at(draws, c0)));
  return m;
}

// The column transform of one 16-row block at columns [c0, c0 + 16): t[j] = kept output j.
inline void cols_block(const float* x, int64_t rows, int64_t ldx, int64_t b, int64_t c0,
                       __mmask16 mask, const HadamardKeep& keep, __m512* t) {
  __m512 v[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    const int64_t row = 16 * b + i;
    v[i] = row < rows ? _mm512_maskz_loadu_ps(mask, x + row * ldx + c0) : _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int h = 1; h < 16; h <<= 1)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i)
      if (!(i & h)) {
        const __m512 u = v[i], w = v[i + h];
        v[i] = _mm512_add_ps(u, w);
        v[i + h] = _mm512_sub_ps(u, w);
      }
  for (int j = 0; j < keep.r; ++j) t[j] = v[keep.idx[j]];
}

struct BlockStats {
  float absmax = 0.f;
  double sum_sq = 0.0, sum_abs = 0.0;
};

inline BlockStats cols_block_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx, int64_t b,
                                   const HadamardKeep& keep, bool sums) {
  __m512 mv = _mm512_setzero_ps(), sq = _mm512_setzero_ps(), ab = _mm512_setzero_ps();
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    __m512 t[16];
    cols_block(x, rows, ldx, b, c0, tail_mask(cols - c0), keep, t);
    for (int j = 0; j < keep.r; ++j) {
      const __m512 a = _mm512_abs_ps(t[j]);
      mv = _mm512_max_ps(mv, a);
      if (sums) {
        sq = _mm512_fmadd_ps(t[j], t[j], sq);
        ab = _mm512_add_ps(ab, a);
      }
    }
  }
  BlockStats s;
  s.absmax = _mm512_reduce_max_ps(mv);
  if (sums) {
    s.sum_sq = _mm512_reduce_add_ps(sq);
    s.sum_abs = _mm512_reduce_add_ps(ab);
  }
  return s;
}

// Block b's r output rows (draws: r·cols + 16 words of scratch).
inline void cols_block_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx, int64_t b,
                                const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q,
                                uint32_t* draws) {
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(b * keep.r * cols), keep.r * cols, draws);
  for (int64_t c0 = 0; c0 < cols; c0 += 16) {
    const __mmask16 mask = tail_mask(cols - c0);
    __m512 t[16];
    cols_block(x, rows, ldx, b, c0, mask, keep, t);
    for (int j = 0; j < keep.r; ++j)
      _mm_mask_storeu_epi8(q + (b * keep.r + j) * cols + c0, mask,
                           quant16(t[j], iv, qm, p.stochastic, draw_at(draws, j * cols + c0)));
  }
}
}  // namespace

float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax) {
  float m = 0.f;
#pragma omp parallel for reduction(max : m) if (rows * cols > kParallelWork) schedule(dynamic, 16)
  for (int64_t r = 0; r < rows; ++r) {
    const float rm = transformed_row_absmax(x + r * ldx, cols);
    if (row_absmax) row_absmax[r] = rm;
    m = std::max(m, rm);
  }
  return m;
}

void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(round_up16(cols)) : 0);
#pragma omp for schedule(dynamic, 16)
    for (int64_t r = 0; r < rows; ++r)
      row_quantize(x + r * ldx, r, cols, row_inv ? row_inv[r] : inv, p, q, draws.data());
  }
}

void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
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
  parallel_rows(rows, rows * cols, [&](int64_t r) {
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      _mm512_storeu_ps(y + r * c16 + c0,
                       fwht16_reg(load16(x + r * ldx, c0, cols)));
  });
}

namespace {
// Lane j of the result is lane keep.idx[j] of a (j < keep.r).
inline __m512i keep_permutation(const HadamardKeep& keep) {
  alignas(64) int32_t idx[16];
  for (int j = 0; j < 16; ++j) idx[j] = j < keep.r ? keep.idx[j] : 0;
  return _mm512_load_si512(idx);
}
}  // namespace

float fwht16_rows_keep_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  const __m512i perm = keep_permutation(keep);
  const __mmask16 km = tail_mask(keep.r);
  __m512 mv = _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const __m512 a = _mm512_permutexvar_ps(perm, fwht16_reg(load16(x + r * ldx, c0, cols)));
      mv = _mm512_mask_max_ps(mv, km, mv, _mm512_abs_ps(a));
    }
  return _mm512_reduce_max_ps(mv);
}

void fwht16_rows_keep_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                               const HadamardKeep& keep, float inv, const QuantParams& p,
                               int8_t* q, int64_t ldq) {
  const __m512i perm = keep_permutation(keep);
  const __mmask16 km = tail_mask(keep.r);
  const int64_t width = (cols + 15) / 16 * keep.r;
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(width + 16) : 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * width), width, draws.data());
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const int64_t oc = c0 / 16 * keep.r;
      const __m512 a = _mm512_permutexvar_ps(perm, fwht16_reg(load16(x + r * ldx, c0, cols)));
      _mm_mask_storeu_epi8(q + r * ldq + oc, km, quant16(a, iv, qm, p.stochastic, draw_at(draws.data(), oc)));
    }
  }
}

namespace {
// Bytes lo..hi-1 of a 64-byte vector (0 <= lo <= hi <= 64).
inline __mmask64 byte_lanes(int64_t lo, int64_t hi) {
  const auto below = [](int64_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; };
  return static_cast<__mmask64>(below(hi) & ~below(lo));
}

// im2col_row_levels with masked loads and stores per output row (the scalar version pays
// three library calls per row, and Wo is 4 or 8 on the last ResNet stages): stride 1 along W
// 64 bytes at a time, stride 2 as the even bytes of 64 (vpmovwb keeps each word's low byte).
void im2col_row_levels_avx512(const int8_t* plane, int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t i,
                              int64_t j, const Conv2dArgs& a, int8_t* row) {
  const int64_t sw = a.stride[1];
  if (sw != 1 && sw != 2) return im2col_row_levels(plane, H, W, Ho, Wo, i, j, a, row);
  const int64_t iw0 = j * a.dilation[1] - a.padding[1], step = 64 / sw;  // output columns per load
  for (int64_t oh = 0; oh < Ho; ++oh) {
    int8_t* d = row + oh * Wo;
    const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
    const bool inside = ih >= 0 && ih < H;
    const char* src = reinterpret_cast<const char*>(plane + (inside ? ih * W : 0));
    for (int64_t w0 = 0; w0 < Wo; w0 += step) {
      const int64_t n = std::min(step, Wo - w0), c0 = iw0 + w0 * sw;  // byte k of the load: column c0 + k
      const int64_t lo = std::clamp<int64_t>(-c0, 0, n * sw), hi = std::clamp<int64_t>(W - c0, lo, n * sw);
      const __m512i v = inside ? _mm512_maskz_loadu_epi8(byte_lanes(lo, hi), src + c0) : _mm512_setzero_si512();
      if (sw == 1)
        _mm512_mask_storeu_epi8(d + w0, byte_lanes(0, n), v);
      else
        _mm256_mask_storeu_epi8(d + w0, static_cast<__mmask32>(byte_lanes(0, n)), _mm512_cvtepi16_epi8(v));
    }
  }
}

// Calls f(i, b, a) with a = the kept outputs (lanes < keep.r) of 16-block b of im2col row i.
// The levels are gathered by byte copies first. With stride 1 along H, the rows (c, i, j) of
// one (c, j) are consecutive slices of one plane (the padded rows of channel c read at tap j),
// so that plane is built once for the kH rows; otherwise each row is gathered on its own.
template <typename F>
void for_each_im2col_block(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                           int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep, F&& f) {
  const int64_t Ho = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]);
  const int64_t Wo = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]), L = Ho * Wo;
  const int64_t blocks = (L + 15) / 16;
  const bool shared_plane = a.stride[0] == 1;
  const int64_t plane_rows = shared_plane ? H + 2 * a.padding[0] : Ho;  // padded rows -ph .. H+ph-1
  const __m512i perm = keep_permutation(keep);
  const __m512 sv = _mm512_set1_ps(s);
  std::vector<int8_t> levels(static_cast<size_t>(plane_rows * Wo + 16), 0);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < kW; ++j) {
      // plane row p is input row p - ph: im2col_row_levels' row for tap (0, j), stride 1
      if (shared_plane) im2col_row_levels_avx512(q + c * H * W, H, W, plane_rows, Wo, 0, j, a, levels.data());
      for (int64_t i = 0; i < kH; ++i) {
        const int8_t* src = levels.data();
        if (shared_plane)
          src += i * a.dilation[0] * Wo;
        else
          im2col_row_levels_avx512(q + c * H * W, H, W, Ho, Wo, i, j, a, levels.data());
        const int64_t row = (c * kH + i) * kW + j;
        for (int64_t b = 0; b < blocks; ++b) {
          const __m128i bytes = _mm_maskz_loadu_epi8(tail_mask(L - 16 * b), src + 16 * b);  // zeros past L
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), sv);
          f(row, b, _mm512_permutexvar_ps(perm, fwht16_reg(v)));
        }
      }
    }
}
}  // namespace

float hla_im2col_absmax(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                        int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep) {
  const __mmask16 km = tail_mask(keep.r);
  __m512 mv = _mm512_setzero_ps();
  for_each_im2col_block(q, s, C, H, W, kH, kW, a, keep, [&](int64_t, int64_t, __m512 v) {
    mv = _mm512_mask_max_ps(mv, km, mv, _mm512_abs_ps(v));
  });
  return _mm512_reduce_max_ps(mv);
}

void hla_im2col_quantize(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH,
                         int64_t kW, const Conv2dArgs& a, const HadamardKeep& keep, float inv,
                         const QuantParams& p, int8_t* out, int64_t ldq) {
  const __mmask16 km = tail_mask(keep.r);
  const int64_t L = conv_out(H, kH, a.stride[0], a.padding[0], a.dilation[0]) *
                    conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]);
  const int64_t width = (L + 15) / 16 * keep.r;
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(width + 16) : 0);
  int64_t last_row = -1;
  for_each_im2col_block(q, s, C, H, W, kH, kW, a, keep, [&](int64_t row, int64_t b, __m512 v) {
    if (p.stochastic && row != last_row) {
      philox_fill(p.key, static_cast<uint64_t>(row * width), width, draws.data());
      last_row = row;
    }
    _mm_mask_storeu_epi8(out + row * ldq + b * keep.r, km,
                         quant16(v, iv, qm, p.stochastic, draw_at(draws.data(), b * keep.r)));
  });
}

float hla_im2col_table(const int8_t* q, float s, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                       const Conv2dArgs& a, const HadamardKeep& keep, float* table) {
  const int64_t WB = conv_out(W, kW, a.stride[1], a.padding[1], a.dilation[1]) / 16;
  const std::vector<char> read = input_rows_read(H, kH, a);
  const __m512i perm = keep_permutation(keep);
  const __mmask16 km = tail_mask(keep.r);
  const __m512 sv = _mm512_set1_ps(s);
  __m512 mv = _mm512_setzero_ps();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t j = 0; j < kW; ++j)
      for (int64_t ih = 0; ih < H; ++ih) {
        float* e = table + ((c * kW + j) * H + ih) * WB * keep.r;
        if (!read[static_cast<size_t>(ih)]) {
          std::memset(e, 0, static_cast<size_t>(WB * keep.r) * sizeof(float));
          continue;
        }
        const char* src = reinterpret_cast<const char*>(q + (c * H + ih) * W);
        for (int64_t wb = 0; wb < WB; ++wb) {
          // lanes t read input column iw0 + t; those in the padding are zeros (masked load)
          const int64_t iw0 = wb * 16 - a.padding[1] + j * a.dilation[1];
          const int64_t lo = std::max<int64_t>(0, -iw0), hi = std::min<int64_t>(16, W - iw0);
          const __mmask16 m = hi > lo ? static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1)) : 0;
          const __m128i bytes = _mm_maskz_loadu_epi8(m, src + iw0);
          const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)), sv);
          const __m512 t = _mm512_permutexvar_ps(perm, fwht16_reg(v));
          mv = _mm512_mask_max_ps(mv, km, mv, _mm512_abs_ps(t));
          _mm512_mask_storeu_ps(e + wb * keep.r, km, t);
        }
      }
  return _mm512_reduce_max_ps(mv);
}

void hla_im2col_table_quantize(const float* table, int64_t C, int64_t H, int64_t W, int64_t kH, int64_t kW,
                               const Conv2dArgs& a, const HadamardKeep& keep, float inv, int qmax, int8_t* out,
                               int64_t ldq) {
  const int64_t n = hla_im2col_table_size(C, H, W, kW, a, keep);
  std::vector<int8_t> qt(static_cast<size_t>(n));
  const __m512 qm = _mm512_set1_ps(static_cast<float>(qmax)), iv = _mm512_set1_ps(inv);
  for (int64_t e = 0; e < n; e += 16) {
    const __mmask16 m = tail_mask(n - e);
    _mm_mask_storeu_epi8(qt.data() + e, m, quant16(_mm512_maskz_loadu_ps(m, table + e), iv, qm, false, nullptr));
  }
  expand_table_rows(qt.data(), C, H, W, kH, kW, a, keep.r, out, ldq);
}

TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  const int64_t blocks = (rows + 15) / 16;
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (rows * cols > kParallelWork) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const BlockStats bs = cols_block_stats(x, rows, cols, ldx, b, keep, true);
    m = std::max(m, bs.absmax);
    ssq += bs.sum_sq;
    sab += bs.sum_abs;
  }
  TensorStats s;
  s.absmax = m;
  s.sum_sq = ssq;
  s.sum_abs = sab;
  s.count = blocks * keep.r * cols;
  return s;
}

void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q) {
  const int64_t blocks = (rows + 15) / 16;
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(keep.r * cols + 16) : 0);
#pragma omp for schedule(dynamic, 16)
    for (int64_t b = 0; b < blocks; ++b) cols_block_quantize(x, rows, cols, ldx, b, keep, inv, p, q, draws.data());
  }
}

void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y) {
  const int64_t blocks = (rows + 15) / 16;
  parallel_rows(blocks, rows * cols, [&](int64_t b) {
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      const __mmask16 mask = tail_mask(cols - c0);
      __m512 t[16];
      cols_block(x, rows, ldx, b, c0, mask, keep, t);
      for (int j = 0; j < keep.r; ++j) _mm512_mask_storeu_ps(y + (b * keep.r + j) * cols + c0, mask, t[j]);
    }
  });
}

DualScales fwht16_dual_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                const QuantParams& prow, bool per_row, int8_t* q_rows,
                                float* row_scale, const HadamardKeep& keep,
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

// One chunk's statistics. The parallel loops below call a function per chunk and hold no
// vector type themselves: clang does not give OpenMP's outlined bodies the region's target
// attribute, so AVX-512 code written inside them fails to compile on a CPU without AVX-512.
struct ChunkStats {
  float absmax, sum_sq, sum_abs;
};

ChunkStats stats_chunk(const float* x, int64_t i0, int64_t i1) {
  __m512 mv = _mm512_setzero_ps(), sq = _mm512_setzero_ps(), ab = _mm512_setzero_ps();
  for (int64_t i = i0; i < i1; i += 16) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask(i1 - i), x + i), a = _mm512_abs_ps(v);
    mv = _mm512_max_ps(mv, a);
    sq = _mm512_fmadd_ps(v, v, sq);
    ab = _mm512_add_ps(ab, a);
  }
  return {_mm512_reduce_max_ps(mv), _mm512_reduce_add_ps(sq), _mm512_reduce_add_ps(ab)};
}

TensorStats tensor_stats(const float* x, int64_t n) {
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
  const int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (n > kParallelWork) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const ChunkStats c = stats_chunk(x, ch * 4096, std::min(n, (ch + 1) * 4096));
    m = std::max(m, c.absmax);
    ssq += c.sum_sq;
    sab += c.sum_abs;
  }
  TensorStats s;
  s.absmax = m;
  s.sum_sq = ssq;
  s.sum_abs = sab;
  s.count = n;
  return s;
}

void quantize_chunk(const float* x, int64_t i0, int64_t i1, float inv, const QuantParams& p, int8_t* q,
                    uint32_t* draws) {
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(i0), i1 - i0, draws);
  for (int64_t i = i0; i < i1; i += 16)
    _mm_mask_storeu_epi8(q + i, tail_mask(i1 - i),
                         quant16(_mm512_maskz_loadu_ps(tail_mask(i1 - i), x + i), iv, qm, p.stochastic,
                                 draw_at(draws, i - i0)));
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
}  // namespace avx512

const QuantizeImpl kQuantizeAvx512{
    avx512::philox_fill,
    avx512::fwht16_rows_absmax,
    avx512::fwht16_rows_quantize,
    avx512::fwht16_rows_quantize_per_row,
    avx512::fwht16_rows,
    avx512::fwht16_rows_keep_absmax,
    avx512::fwht16_rows_keep_quantize,
    avx512::hla_im2col_absmax,
    avx512::hla_im2col_quantize,
    avx512::hla_im2col_table,
    avx512::hla_im2col_table_quantize,
    avx512::fwht16_cols_stats,
    avx512::fwht16_cols_quantize,
    avx512::fwht16_cols,
    avx512::fwht16_dual_quantize,
    avx512::tensor_stats,
    avx512::quantize};

}  // namespace lb::cpu

#endif  // LB_QUANT_X86_64
