// CPU quantisation kernels for HOT (contract in quantize.h): scalar references, then the
// AVX-512 kernels. The vector kernels perform exactly the reference's float operations in the
// same order (the butterflies a+b / a-b by stage 1, 2, 4, 8; x·inv; max then min; floor or
// rint; one compare against the draw), so their int8 outputs are bit-identical.
#include "src/cpu/quantize.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__)
#define LB_QUANT_AVX512 1
#include <immintrin.h>
// GCC 12 warns inside its own intrinsic headers (_mm512_undefined_*: GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace lb::cpu {

namespace {
constexpr int64_t kParallelWork = 1 << 15;  // elements below which loops stay serial

inline void fwht16_scalar(float* a) {
  for (int h = 1; h < 16; h <<= 1)
    for (int i = 0; i < 16; ++i)
      if (!(i & h)) {
        const float u = a[i], v = a[i + h];
        a[i] = u + v;
        a[i + h] = u - v;
      }
}

inline int8_t quant_one(float x, float inv, const QuantParams& p, uint64_t e) {
  return p.stochastic ? quant::quantize_sr(x, inv, p.qmax, quant::philox_draw(p.key, e))
                      : quant::quantize_rtn(x, inv, p.qmax);
}

inline void stats_add(TensorStats& s, float v) {
  const float a = std::fabs(v);
  s.absmax = std::max(s.absmax, a);
  s.sum_sq += static_cast<double>(v) * v;
  s.sum_abs += a;
  ++s.count;
}
}  // namespace

// ============================== scalar references ==============================
namespace ref {

void philox_fill(const PhiloxKey& key, uint64_t e0, int64_t n, uint32_t* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = quant::philox_draw(key, e0 + static_cast<uint64_t>(i));
}

float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax) {
  float m = 0.f;
  for (int64_t r = 0; r < rows; ++r) {
    float rm = 0.f;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (float v : a) rm = std::max(rm, std::fabs(v));
    }
    if (row_absmax) row_absmax[r] = rm;
    m = std::max(m, rm);
  }
  return m;
}

void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
  const int64_t c16 = round_up16(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float ir = row_inv ? row_inv[r] : inv;
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < 16; ++j) {
        const int64_t e = r * c16 + c0 + j;
        q[e] = quant_one(a[j], ir, p, static_cast<uint64_t>(e));
      }
    }
  }
}

void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
  std::vector<float> inv(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    float m;
    ref::fwht16_rows_absmax(x + r * ldx, 1, cols, ldx, &m);
    row_scale[r] = quant::scale_from_absmax(m, p.qmax);
    inv[static_cast<size_t>(r)] = quant::inv_scale_from_absmax(m, p.qmax);
  }
  ref::fwht16_rows_quantize(x, rows, cols, ldx, inv.data(), 0.f, p, q);
}

void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  const int64_t c16 = round_up16(cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      float a[16];
      for (int j = 0; j < 16; ++j) a[j] = c0 + j < cols ? x[r * ldx + c0 + j] : 0.f;
      fwht16_scalar(a);
      std::memcpy(y + r * c16 + c0, a, sizeof a);
    }
}

namespace {
// Calls f(out_row, col, value) for every kept output of the column transform.
template <typename F>
void for_each_col_output(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         const HadamardKeep& keep, F&& f) {
  const int64_t blocks = (rows + 15) / 16;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t c = 0; c < cols; ++c) {
      float a[16];
      for (int t = 0; t < 16; ++t) a[t] = 16 * b + t < rows ? x[(16 * b + t) * ldx + c] : 0.f;
      fwht16_scalar(a);
      for (int j = 0; j < keep.r; ++j) f(b * keep.r + j, c, a[keep.idx[j]]);
    }
}
}  // namespace

TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  TensorStats s;
  for_each_col_output(x, rows, cols, ldx, keep, [&](int64_t, int64_t, float v) { stats_add(s, v); });
  return s;
}

void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q) {
  for_each_col_output(x, rows, cols, ldx, keep, [&](int64_t R, int64_t c, float v) {
    const int64_t e = R * cols + c;
    q[e] = quant_one(v, inv, p, static_cast<uint64_t>(e));
  });
}

void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y) {
  for_each_col_output(x, rows, cols, ldx, keep,
                      [&](int64_t R, int64_t c, float v) { y[R * cols + c] = v; });
}

TensorStats tensor_stats(const float* x, int64_t n) {
  TensorStats s;
  for (int64_t i = 0; i < n; ++i) stats_add(s, x[i]);
  return s;
}

void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = quant_one(x[i], inv, p, static_cast<uint64_t>(i));
}

}  // namespace ref

void dequantize(const int8_t* q, int64_t n, float scale, float* y) {
#pragma omp parallel for if (n > 16 * kParallelWork) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(q[i]) * scale;
}

#if !LB_QUANT_AVX512
// Without AVX-512 the references are the kernels.
void philox_fill(const PhiloxKey& k, uint64_t e0, int64_t n, uint32_t* out) { ref::philox_fill(k, e0, n, out); }
float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* ra) {
  return ref::fwht16_rows_absmax(x, rows, cols, ldx, ra);
}
void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
  ref::fwht16_rows_quantize(x, rows, cols, ldx, row_inv, inv, p, q);
}
void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
  ref::fwht16_rows_quantize_per_row(x, rows, cols, ldx, p, q, row_scale);
}
void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  ref::fwht16_rows(x, rows, cols, ldx, y);
}
TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  return ref::fwht16_cols_stats(x, rows, cols, ldx, keep);
}
void fwht16_cols_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q) {
  ref::fwht16_cols_quantize(x, rows, cols, ldx, keep, inv, p, q);
}
void fwht16_cols(const float* x, int64_t rows, int64_t cols, int64_t ldx, const HadamardKeep& keep,
                 float* y) {
  ref::fwht16_cols(x, rows, cols, ldx, keep, y);
}
TensorStats tensor_stats(const float* x, int64_t n) { return ref::tensor_stats(x, n); }
void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  ref::quantize(x, n, inv, p, q);
}
#else
// ============================== AVX-512 kernels ==============================
namespace {

inline __mmask16 tail_mask(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// In-register 16-point FWHT: lane i with bit h clear gets a[i] + a[i+h], the partner
// a[i] - a[i+h] (a·(-1) + partner: one rounding, as the scalar subtraction).
inline __m512 fwht16_reg(__m512 a) {
  const __m512 s1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 s2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
  const __m512 s4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
  const __m512 s8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
  a = _mm512_fmadd_ps(a, s1, _mm512_permute_ps(a, 0xB1));
  a = _mm512_fmadd_ps(a, s2, _mm512_permute_ps(a, 0x4E));
  a = _mm512_fmadd_ps(a, s4, _mm512_shuffle_f32x4(a, a, 0xB1));
  a = _mm512_fmadd_ps(a, s8, _mm512_shuffle_f32x4(a, a, 0x4E));
  return a;
}

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

inline __m512i mulhi_epu32(__m512i a, __m512i m) {
  const __m512i even = _mm512_srli_epi64(_mm512_mul_epu32(a, m), 32);
  const __m512i odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
  return _mm512_mask_blend_epi32(0xAAAA, even, odd);
}

// Philox4x32-10 on 16 counters at once (lane j: block b0 + j); out: 64 words in stream order.
inline void philox16(const PhiloxKey& k, uint64_t b0, uint32_t* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i c0 = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0))), lane);
  __m512i c1 = _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(b0 >> 32)));
  if (static_cast<uint32_t>(b0) > 0xFFFFFFFFu - 15u) {  // the low word wraps inside the group
    alignas(64) uint32_t hi[16];
    for (int j = 0; j < 16; ++j) hi[j] = static_cast<uint32_t>((b0 + j) >> 32);
    c1 = _mm512_load_si512(hi);
  }
  __m512i c2 = _mm512_set1_epi32(static_cast<int>(k.sub0));
  __m512i c3 = _mm512_set1_epi32(static_cast<int>(k.sub1));
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t key0 = k.key0, key1 = k.key1;
  for (int r = 0; r < 10; ++r) {
    const __m512i hi0 = mulhi_epu32(c0, m0), lo0 = _mm512_mullo_epi32(c0, m0);
    const __m512i hi1 = mulhi_epu32(c2, m1), lo1 = _mm512_mullo_epi32(c2, m1);
    c0 = _mm512_ternarylogic_epi32(hi1, c1, _mm512_set1_epi32(static_cast<int>(key0)), 0x96);
    c1 = lo1;
    c2 = _mm512_ternarylogic_epi32(hi0, c3, _mm512_set1_epi32(static_cast<int>(key1)), 0x96);
    c3 = lo0;
    key0 += 0x9E3779B9u;
    key1 += 0xBB67AE85u;
  }
  // (4 words x 16 blocks) -> stream order: block j's words at out[4j .. 4j+3].
  const __m512i t0 = _mm512_unpacklo_epi32(c0, c1), t1 = _mm512_unpackhi_epi32(c0, c1);
  const __m512i t2 = _mm512_unpacklo_epi32(c2, c3), t3 = _mm512_unpackhi_epi32(c2, c3);
  const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
  const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
  // u_w lane l holds block 4l + w.
  const __m512i v0 = _mm512_shuffle_i32x4(u0, u1, 0x88), v1 = _mm512_shuffle_i32x4(u2, u3, 0x88);
  const __m512i v2 = _mm512_shuffle_i32x4(u0, u1, 0xDD), v3 = _mm512_shuffle_i32x4(u2, u3, 0xDD);
  _mm512_storeu_si512(out, _mm512_shuffle_i32x4(v0, v1, 0x88));       // blocks 0..3
  _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(v2, v3, 0x88));  // blocks 4..7
  _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(v0, v1, 0xDD));  // blocks 8..11
  _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(v2, v3, 0xDD));  // blocks 12..15
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
  for (; i + 64 <= n; i += 64) philox16(k, (e0 + static_cast<uint64_t>(i)) >> 2, out + i);
  if (i < n) {
    alignas(64) uint32_t buf[64];
    philox16(k, (e0 + static_cast<uint64_t>(i)) >> 2, buf);
    std::memcpy(out + i, buf, static_cast<size_t>(n - i) * sizeof(uint32_t));
  }
}

float fwht16_rows_absmax(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                         float* row_absmax) {
  float m = 0.f;
#pragma omp parallel for reduction(max : m) if (rows * cols > kParallelWork) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    __m512 mv = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      mv = _mm512_max_ps(mv, _mm512_abs_ps(fwht16_reg(_mm512_maskz_loadu_ps(tail_mask(cols - c0), x + r * ldx + c0))));
    const float rm = _mm512_reduce_max_ps(mv);
    if (row_absmax) row_absmax[r] = rm;
    m = std::max(m, rm);
  }
  return m;
}

void fwht16_rows_quantize(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                          const float* row_inv, float inv, const QuantParams& p, int8_t* q) {
  const int64_t c16 = round_up16(cols);
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax));
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(c16) : 0);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 iv = _mm512_set1_ps(row_inv ? row_inv[r] : inv);
      if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws.data());
      for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const __m512 a = fwht16_reg(_mm512_maskz_loadu_ps(tail_mask(cols - c0), x + r * ldx + c0));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0),
                         quant16(a, iv, qm, p.stochastic, draws.data() + c0));
      }
    }
  }
}

void fwht16_rows_quantize_per_row(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                                  const QuantParams& p, int8_t* q, float* row_scale) {
  const int64_t c16 = round_up16(cols);
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax));
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(c16) : 0);
    std::vector<float> t(static_cast<size_t>(c16));  // the transformed row (L1)
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      __m512 mv = _mm512_setzero_ps();
      for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const __m512 a = fwht16_reg(_mm512_maskz_loadu_ps(tail_mask(cols - c0), x + r * ldx + c0));
        _mm512_storeu_ps(t.data() + c0, a);
        mv = _mm512_max_ps(mv, _mm512_abs_ps(a));
      }
      const float m = _mm512_reduce_max_ps(mv);
      row_scale[r] = quant::scale_from_absmax(m, p.qmax);
      const __m512 iv = _mm512_set1_ps(quant::inv_scale_from_absmax(m, p.qmax));
      if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(r * c16), c16, draws.data());
      for (int64_t c0 = 0; c0 < cols; c0 += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(q + r * c16 + c0),
                         quant16(_mm512_loadu_ps(t.data() + c0), iv, qm, p.stochastic, draws.data() + c0));
    }
  }
}

void fwht16_rows(const float* x, int64_t rows, int64_t cols, int64_t ldx, float* y) {
  const int64_t c16 = round_up16(cols);
  parallel_rows(rows, rows * cols, [&](int64_t r) {
    for (int64_t c0 = 0; c0 < cols; c0 += 16)
      _mm512_storeu_ps(y + r * c16 + c0,
                       fwht16_reg(_mm512_maskz_loadu_ps(tail_mask(cols - c0), x + r * ldx + c0)));
  });
}

namespace {
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
}  // namespace

TensorStats fwht16_cols_stats(const float* x, int64_t rows, int64_t cols, int64_t ldx,
                              const HadamardKeep& keep) {
  const int64_t blocks = (rows + 15) / 16;
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (rows * cols > kParallelWork) schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    __m512 mv = _mm512_setzero_ps(), sq = _mm512_setzero_ps(), ab = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < cols; c0 += 16) {
      __m512 t[16];
      cols_block(x, rows, ldx, b, c0, tail_mask(cols - c0), keep, t);
      for (int j = 0; j < keep.r; ++j) {
        const __m512 a = _mm512_abs_ps(t[j]);
        mv = _mm512_max_ps(mv, a);
        sq = _mm512_fmadd_ps(t[j], t[j], sq);
        ab = _mm512_add_ps(ab, a);
      }
    }
    m = std::max(m, _mm512_reduce_max_ps(mv));
    ssq += _mm512_reduce_add_ps(sq);
    sab += _mm512_reduce_add_ps(ab);
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
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
#pragma omp parallel if (rows * cols > kParallelWork)
  {
    // Draws of the block's r output rows (contiguous in the stream), plus a padded tail.
    std::vector<uint32_t> draws(p.stochastic ? static_cast<size_t>(keep.r * cols + 16) : 0);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(b * keep.r * cols), keep.r * cols, draws.data());
      for (int64_t c0 = 0; c0 < cols; c0 += 16) {
        const __mmask16 mask = tail_mask(cols - c0);
        __m512 t[16];
        cols_block(x, rows, ldx, b, c0, mask, keep, t);
        for (int j = 0; j < keep.r; ++j)
          _mm_mask_storeu_epi8(q + (b * keep.r + j) * cols + c0, mask,
                               quant16(t[j], iv, qm, p.stochastic, draws.data() + j * cols + c0));
      }
    }
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

TensorStats tensor_stats(const float* x, int64_t n) {
  float m = 0.f;
  double ssq = 0.0, sab = 0.0;
  const int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel for reduction(max : m) reduction(+ : ssq, sab) if (n > kParallelWork) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    __m512 mv = _mm512_setzero_ps(), sq = _mm512_setzero_ps(), ab = _mm512_setzero_ps();
    for (int64_t i = ch * 4096; i < std::min(n, (ch + 1) * 4096); i += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i), a = _mm512_abs_ps(v);
      mv = _mm512_max_ps(mv, a);
      sq = _mm512_fmadd_ps(v, v, sq);
      ab = _mm512_add_ps(ab, a);
    }
    m = std::max(m, _mm512_reduce_max_ps(mv));
    ssq += _mm512_reduce_add_ps(sq);
    sab += _mm512_reduce_add_ps(ab);
  }
  TensorStats s;
  s.absmax = m;
  s.sum_sq = ssq;
  s.sum_abs = sab;
  s.count = n;
  return s;
}

void quantize(const float* x, int64_t n, float inv, const QuantParams& p, int8_t* q) {
  const __m512 qm = _mm512_set1_ps(static_cast<float>(p.qmax)), iv = _mm512_set1_ps(inv);
  const int64_t chunks = (n + 4095) / 4096;
#pragma omp parallel if (n > kParallelWork)
  {
    std::vector<uint32_t> draws(p.stochastic ? 4096 + 16 : 0);
#pragma omp for schedule(static)
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const int64_t i0 = ch * 4096, i1 = std::min(n, i0 + 4096);
      if (p.stochastic) philox_fill(p.key, static_cast<uint64_t>(i0), i1 - i0, draws.data());
      for (int64_t i = i0; i < i1; i += 16)
        _mm_mask_storeu_epi8(q + i, tail_mask(i1 - i),
                             quant16(_mm512_maskz_loadu_ps(tail_mask(i1 - i), x + i), iv, qm,
                                     p.stochastic, draws.data() + (i - i0)));
    }
  }
}
#endif  // LB_QUANT_AVX512

}  // namespace lb::cpu
