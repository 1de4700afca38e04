// bf16 GEMM on AVX512-BF16 (contract in sgemm_bf16.h).
//
// vdpbf16ps multiplies 16 lanes of bf16 pairs and adds both products to f32 lanes:
// acc[i] += a[2i]·b[2i] + a[2i+1]·b[2i+1]. So the packing works on pairs of k:
//  - B is packed per (kc, nc) block into panels of kNR = 48 columns: k-pair p of a panel is
//    48 dwords, dword n = (bf16 b[2p, n], bf16 b[2p+1, n]) (zero past N and past K).
//  - A is packed per (mc, kc) block into micro-panels of kMR = 8 rows: k-pair p holds the 8
//    dwords (a[r, 2p], a[r, 2p+1]), each broadcast to all lanes by the kernel.
//  - The micro-kernel keeps an 8 x 48 f32 tile of C in 24 zmm accumulators: per k-pair, 3
//    loads of B, 8 broadcasts of A, 24 vdpbf16ps (two k's each: twice the fp32 kernel's
//    products per instruction, and half its packed bytes).
// Blocking as in the fp32 kernel (sgemm_avx512.cpp) with twice the k per block (the packed
// A micro-panel stays 8 KiB, in L1). Rounding happens in the packing (vcvtne2ps2bf16, round
// to nearest even, as f32_to_bf16 in dtype.h), so each operand is rounded once per packing;
// an operand already in bf16 (an activation kept for backward) is packed as it is.
// Packing: sources whose runs along k are contiguous go through 8 x 16 dword register
// transposes; sources whose rows run along the panel are walked row after row across the
// whole block, writing whole destination lines (pack_a_rows, pack_b_rows).
// Measured on the 2-vCPU AMD EPYC (Zen 5) dev machine, one thread: vdpbf16ps peaks at 417
// GFLOP/s (vfmadd231ps at 225); this kernel runs 315-400 GFLOP/s on the Linear shapes of
// bert_mini and docs/design.md (`leanback bench gemm --precision bf16`), 285-345 on attention's
// per-head 128 x 64 x 128 products. Tried and dropped: 48 + 16 instead of 32 + 32 for a
// 64-column tail (n = 64: 306 -> 275 GFLOP/s, 128 x 64 x 128: 291 -> 262).
#include "src/cpu/sgemm_bf16.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <cstdlib>
#include <cstring>

#include "src/cpu/amx_gemm.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/gemm_blocking.h"
#include "src/cpu/isa_target.h"

#if defined(__x86_64__)
#define LB_SGEMM_BF16 1
#include <immintrin.h>
// GCC 12 warns inside its own intrinsic headers (_mm512_undefined_*: GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace lb::cpu {

#if LB_SGEMM_BF16
LB_ISA_BEGIN_AVX512_BF16
namespace {

constexpr int kMR = 8;             // rows of the register tile
constexpr int kNV = 3;             // zmm vectors per tile row
constexpr int kNR = 16 * kNV;      // columns of the register tile (a packed B panel)
constexpr int64_t kKC = 512;       // contraction block, in k (256 pairs)
constexpr int64_t kNC = 480;       // columns of a packed B block (multiple of kNR)
constexpr int64_t kMC = 1536;      // rows of a packed A block (multiple of kMR)
static_assert(kNC % kNR == 0 && kMC % kMR == 0 && kKC % 2 == 0);

// Per-thread packing buffers.
thread_local gemm_detail::PackBuffer<uint32_t> t_apack, t_bpack;

inline __mmask16 tail_mask(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : count <= 0 ? __mmask16(0) : __mmask16((1u << count) - 1);
}

// 32 bf16 words [r0[0..15] | r1[0..15]] -> 16 dwords (r0[i], r1[i]).
inline __m512i interleave_halves(__m512i both) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, both);
}

// Two rows of 16 floats (r0 = row 2p, r1 = row 2p+1) -> 16 dwords (bf16 r0[i], bf16 r1[i]).
// (cvtne2ps puts its second source in the low half.)
inline __m512i interleave_pairs(__m512 r0, __m512 r1) {
  return interleave_halves(reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(r1, r0)));
}

// 32 values along k (fewer at the tail: zeros) -> 16 dwords of consecutive pairs. From f32
// they are rounded here; bf16 values (uint16_t) are already pairs in memory.
inline __m512i pairs_along_run(const float* src, int64_t count) {
  const __m512 lo = _mm512_maskz_loadu_ps(tail_mask(count), src);
  const __m512 hi = _mm512_maskz_loadu_ps(tail_mask(count - 16), src + 16);
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}
inline __m512i pairs_along_run(const uint16_t* src, int64_t count) {
  const __mmask32 m = count >= 32 ? ~__mmask32(0) : count <= 0 ? __mmask32(0) : __mmask32((1u << count) - 1);
  return _mm512_maskz_loadu_epi16(m, src);
}

// 16 values of two rows (r0 = row 2p, r1 = row 2p+1; lanes past the mask zero) -> 16 dwords
// (r0[i], r1[i]).
inline __m512i row_pairs(const float* r0, const float* r1, __mmask16 m) {
  const __m512 v0 = _mm512_maskz_loadu_ps(m, r0);
  const __m512 v1 = r1 ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps();
  return interleave_pairs(v0, v1);
}
inline __m512i row_pairs(const uint16_t* r0, const uint16_t* r1, __mmask16 m) {
  const __m256i v0 = _mm256_maskz_loadu_epi16(m, r0);
  const __m256i v1 = r1 ? _mm256_maskz_loadu_epi16(m, r1) : _mm256_setzero_si256();
  return interleave_halves(_mm512_inserti64x4(_mm512_castsi256_si512(v0), v1, 1));
}

template <typename S>
inline void prefetch(const S* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// 8 runs along k (run i at src + i·si; runs i >= rows read as zeros), 32 values of k each
// (fewer at the tail: zeros) -> the 16 k-pairs of each run, transposed: pair p of the 8 runs
// is the 8 dwords at dst + p·W (only the ceil(count / 2) pairs that exist are written).
// An 8 x 16 dword transpose in registers: 32-bit then 64-bit unpacks within 128-bit lanes,
// then two rounds of lane shuffles; each output vector holds pairs 2j and 2j + 1.
template <int W, typename S>
void transpose_pairs_8x16(const S* src, int64_t si, int rows, int64_t count, uint32_t* dst) {
  __m512i r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = i < rows ? pairs_along_run(src + i * si, count) : _mm512_setzero_si512();
  // t: rows (0,1), (2,3), ... interleaved per lane; u[c] lane L = rows 0-3 of pair 4L + c,
  // u[4 + c] lane L = rows 4-7 of it.
  __m512i t[8], u[8];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  // lo[c] = (u[c].0, u[c].1, u[4+c].0, u[4+c].1), hi[c] the same with lanes 2 and 3.
  __m512i lo[4], hi[4];
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    lo[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
    hi[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
  }
  const __m512i out[8] = {
      _mm512_shuffle_i32x4(lo[0], lo[1], _MM_SHUFFLE(2, 0, 2, 0)),  // pairs 0, 1
      _mm512_shuffle_i32x4(lo[2], lo[3], _MM_SHUFFLE(2, 0, 2, 0)),  // 2, 3
      _mm512_shuffle_i32x4(lo[0], lo[1], _MM_SHUFFLE(3, 1, 3, 1)),  // 4, 5
      _mm512_shuffle_i32x4(lo[2], lo[3], _MM_SHUFFLE(3, 1, 3, 1)),  // 6, 7
      _mm512_shuffle_i32x4(hi[0], hi[1], _MM_SHUFFLE(2, 0, 2, 0)),  // 8, 9
      _mm512_shuffle_i32x4(hi[2], hi[3], _MM_SHUFFLE(2, 0, 2, 0)),  // 10, 11
      _mm512_shuffle_i32x4(hi[0], hi[1], _MM_SHUFFLE(3, 1, 3, 1)),  // 12, 13
      _mm512_shuffle_i32x4(hi[2], hi[3], _MM_SHUFFLE(3, 1, 3, 1)),  // 14, 15
  };
  const int64_t np = std::min<int64_t>(16, (count + 1) / 2);
  if (W == 8 && np == 16) {
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) _mm512_storeu_si512(dst + 16 * j, out[j]);
    return;
  }
  for (int64_t p = 0; p < np; ++p) {
    const __m512i v = out[p / 2];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * W),
                        p % 2 ? _mm512_extracti64x4_epi64(v, 1) : _mm512_castsi512_si256(v));
  }
}

// A panel (W = kMR rows of A, or kNR columns of B) from a source whose runs along k are
// contiguous (A not transposed, B transposed): dst[p·W + i] = pair p of run i (src + i·si),
// for kc values of k (kp = ceil(kc / 2) pairs); runs i >= w are zero up to wpad (a multiple
// of 8). Eight runs at a time through transpose_pairs_8x16, the next eight prefetched (`next`:
// the first run of the panel packed after this one, or null).
template <int W, typename S>
void pack_runs(const S* src, int64_t si, int64_t kc, int w, int wpad, uint32_t* dst,
               const S* next = nullptr) {
  for (int i0 = 0; i0 < wpad; i0 += 8) {
    const int rows = std::clamp(w - i0, 0, 8);
    const S* pf = i0 + 8 < w ? src + (i0 + 8) * si : next;
    const int pf_rows = i0 + 8 < w ? std::min(8, w - i0 - 8) : (next ? 8 : 0);
    for (int64_t k0 = 0; k0 < kc; k0 += 32) {
      for (int q = 0; q < pf_rows; ++q) {
        prefetch(pf + q * si + k0);
        if (sizeof(S) == 4) prefetch(pf + q * si + k0 + 16);
      }
      transpose_pairs_8x16<W>(src + i0 * si + k0, si, rows, kc - k0, dst + (k0 / 2) * W + i0);
    }
  }
}

// Width of the next B panel when `rem` columns are left (a 49..64 tail goes 32 + rest).
inline int64_t panel_width(int64_t rem) { return rem > 64 ? kNR : rem > kNR ? 32 : rem; }

// Sources whose rows run along the panel (op(A) stored (K, M), B stored (K, N)): rows 2p
// and 2p+1 give pair p of each column. Both packers walk the source row after row across the
// whole block width (one sequential stream the hardware prefetcher follows, each source line
// read once) and write whole destination lines at once, so the many destination streams,
// often a multiple of 4 KiB apart, never wait on a half-written line.
constexpr int64_t kRowsAhead = 8;  // source rows prefetched ahead

// A block: mc columns into micro-panels of kMR columns, micro-panel i at dst + i·kMR·kp
// (zero past mc and past kc). Four rows (two pairs) per step: a micro-panel's two pairs are
// one 64-byte line, one store.
template <typename S>
void pack_a_rows(const S* src, int64_t sk, int64_t kc, int64_t mc, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  const int64_t chunk = 64 / static_cast<int64_t>(sizeof(S));  // columns per source line
  for (int64_t p = 0; p < kp; p += 2) {
    const S* r[4];
    for (int t = 0; t < 4; ++t) r[t] = 2 * p + t < kc ? src + (2 * p + t) * sk : nullptr;
    const bool two = p + 1 < kp;
    const bool ahead = 2 * p + kRowsAhead + 3 < kc;
    for (int64_t i = 0; i < mc; i += 16) {
      if (ahead && i % chunk == 0)
        for (int t = 0; t < 4; ++t) prefetch(r[t] + kRowsAhead * sk + i);
      const __mmask16 m = tail_mask(mc - i);
      const __m512i d0 = row_pairs(r[0] + i, r[1] ? r[1] + i : nullptr, m);  // pair p, 16 columns
      uint32_t* lo = dst + (i / kMR) * kMR * kp + p * kMR;  // micro-panel of columns i..i+7
      uint32_t* hi = lo + kMR * kp;                          // and of i+8..i+15
      const bool has_hi = i + kMR < mc;
      if (two) {
        const __m512i d1 = row_pairs(r[2] + i, r[3] ? r[3] + i : nullptr, m);  // pair p + 1
        _mm512_storeu_si512(lo, _mm512_shuffle_i64x2(d0, d1, _MM_SHUFFLE(1, 0, 1, 0)));
        if (has_hi) _mm512_storeu_si512(hi, _mm512_shuffle_i64x2(d0, d1, _MM_SHUFFLE(3, 2, 3, 2)));
      } else {  // the last pair of an odd count
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), _mm512_castsi512_si256(d0));
        if (has_hi) _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), _mm512_extracti64x4_epi64(d0, 1));
      }
    }
  }
}

// B block: nc columns into panels of panel_width() columns, kNR apart (zero past each
// panel's width up to whole 16-column vectors, and past kc). A panel's pair is three lines.
template <typename S>
void pack_b_rows(const S* src, int64_t sk, int64_t kc, int64_t nc, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2;
  const int64_t chunk = 64 / static_cast<int64_t>(sizeof(S));
  for (int64_t p = 0; p < kp; ++p) {
    const S* r0 = src + 2 * p * sk;
    const S* r1 = 2 * p + 1 < kc ? r0 + sk : nullptr;
    if (2 * p + kRowsAhead + 1 < kc)
      for (int64_t j = 0; j < nc; j += chunk) {
        prefetch(r0 + kRowsAhead * sk + j);
        prefetch(r0 + (kRowsAhead + 1) * sk + j);
      }
    int64_t q = 0;
    for (int64_t j0 = 0; j0 < nc; j0 += panel_width(nc - j0), ++q) {
      const int64_t w = panel_width(nc - j0);
      uint32_t* d = dst + q * kNR * kp + p * kNR;
      for (int64_t j = 0; j < w; j += 16)
        _mm512_storeu_si512(d + j, row_pairs(r0 + j0 + j, r1 ? r1 + j0 + j : nullptr, tail_mask(w - j)));
    }
  }
}

struct Tile {
  int64_t kp;            // k-pairs
  const uint32_t* a;     // packed A micro-panel (kMR dwords per pair)
  const uint32_t* b;     // packed B panel (kNR dwords per pair)
  float* c;
  int64_t ldc;
  const float* c_next;  // the tile computed after this one (prefetched), or null
  int mr, nr;
  float alpha, beta;
  bool beta_zero;
};

// Not inlined: inside the driver GCC 12 ran out of registers and spilled B's vectors to the
// stack in the k loop (a store and reload per vdpbf16ps pair, ~30% of the kernel's time).
template <int NV>
__attribute__((noinline)) void micro_kernel(const Tile& t) {
  __m512 acc[kMR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  // C's lines are written (and read unless beta = 0) after the k loop: fetch them now, and
  // the next tile's, which short k loops give the hardware no time to fetch.
  for (int r = 0; r < t.mr; ++r)
    for (int v = 0; v < NV; ++v) prefetch(t.c + r * t.ldc + 16 * v);
  if (t.c_next)  // (may reach past the end of C: prefetches do not fault)
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < kNV; ++v) prefetch(t.c_next + r * t.ldc + 16 * v);
  const uint32_t* a = t.a;
  const uint32_t* b = t.b;
  for (int64_t p = 0; p < t.kp; ++p) {
    __m512i bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_load_si512(b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      const __m512i av = _mm512_set1_epi32(static_cast<int>(a[r]));
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)av, (__m512bh)bv[v]);
    }
    a += kMR;
    b += kNR;
  }
  const __m512 va = _mm512_set1_ps(t.alpha), vb = _mm512_set1_ps(t.beta);
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    if (r >= t.mr) break;
    float* cr = t.c + r * t.ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = tail_mask(t.nr - 16 * v);
      __m512 y = _mm512_mul_ps(acc[r][v], va);
      if (!t.beta_zero) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, cr + 16 * v), vb, y);
      _mm512_mask_storeu_ps(cr + 16 * v, mask, y);
    }
  }
}

inline void run_tile(const Tile& t) {
  if (t.nr > 32)
    micro_kernel<3>(t);
  else if (t.nr > 16)
    micro_kernel<2>(t);
  else
    micro_kernel<1>(t);
}

using gemm_detail::balanced_block;

// SA, SB: float (rounded while packed) or uint16_t (bf16 values, packed as they are).
template <typename SA, typename SB>
void sgemm_bf16_impl(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const SA* a, int64_t lda, const SB* b, int64_t ldb, float beta, float* c,
                     int64_t ldc) {
  if (gemm_detail::gemm_without_product(m, n, k, alpha, beta, c, ldc)) return;
  const int64_t kc_max = balanced_block(k, kKC, 32);
  const int64_t nc_max = balanced_block(n, kNC, kNR);
  const int64_t mc_max = balanced_block(m, kMC, kMR);
  const int64_t kp_max = kc_max / 2;
  uint32_t* apack = t_apack.get(static_cast<size_t>((mc_max + kMR - 1) / kMR * kMR * kp_max));
  uint32_t* bpack = t_bpack.get(static_cast<size_t>((nc_max + kNR - 1) / kNR * kNR * kp_max));
  for (int64_t ic = 0; ic < m; ic += mc_max) {
    const int64_t mc = std::min(mc_max, m - ic);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc), kp = (kc + 1) / 2;
      const bool first = pc == 0;
      const float beta_k = first ? beta : 1.f;
      const bool beta_zero = first && beta == 0.f;
      if (trans_a) {  // op(A) stored (K, M): rows run along m
        pack_a_rows(a + pc * lda + ic, lda, kc, mc, apack);
      } else {
        for (int64_t i = 0; i < mc; i += kMR) {
          const int w = static_cast<int>(std::min<int64_t>(kMR, mc - i));
          const SA* next = i + kMR < mc ? a + (ic + i + kMR) * lda + pc : nullptr;
          pack_runs<kMR>(a + (ic + i) * lda + pc, lda, kc, w, kMR, apack + i * kp, next);
        }
      }
      for (int64_t jc = 0; jc < n; jc += nc_max) {
        const int64_t nc = std::min(nc_max, n - jc);
        if (!trans_b) {  // B stored (K, N)
          pack_b_rows(b + pc * ldb + jc, ldb, kc, nc, bpack);
        } else {
          int64_t np = 0;
          for (int64_t j = 0; j < nc; j += panel_width(nc - j), ++np) {
            const int w = static_cast<int>(panel_width(nc - j));
            const int wpad = std::min(kNR, (w + 15) / 16 * 16);
            const int64_t jn = j + w;
            const SB* next = jn < nc ? b + (jc + jn) * ldb + pc : nullptr;
            pack_runs<kNR>(b + (jc + j) * ldb + pc, ldb, kc, w, wpad, bpack + np * kNR * kp, next);
          }
        }
        for (int64_t i = 0; i < mc; i += kMR) {
          const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - i));
          int64_t p = 0;
          for (int64_t j = 0; j < nc; j += panel_width(nc - j), ++p) {
            const int nr = static_cast<int>(panel_width(nc - j));
            float* cp = c + (ic + i) * ldc + jc + j;
            const float* cn = j + nr < nc ? cp + nr : i + kMR < mc ? c + (ic + i + kMR) * ldc + jc : nullptr;
            const Tile t{kp, apack + i * kp, bpack + p * kNR * kp, cp, ldc, cn, mr, nr, alpha, beta_k,
                         beta_zero};
            run_tile(t);
          }
        }
      }
    }
  }
}

// Seconds for `iters` rounds of 12 independent zmm FMAs (bf16 = false) or vdpbf16ps.
double time_dot_loop(bool bf16, int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(1e-3f * static_cast<float>(i));
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1.001f);
  const __m512bh xb = _mm512_cvtne2ps_pbh(x, x), yb = _mm512_cvtne2ps_pbh(y, y);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t it = 0; it < iters; ++it) {
    if (bf16) {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], xb, yb);
    } else {
#pragma GCC unroll 12
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(x, y, acc[i]);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 sum = acc[0];
  for (int i = 1; i < 12; ++i) sum = _mm512_add_ps(sum, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(sum);  // keeps the loops
  (void)sink;
  return s;
}

// Multiply-adds per second of vdpbf16ps (32 per instruction) over vfmadd231ps's (16): the
// best of 3 interleaved rounds each, so a preempted round does not decide.
double measure_dot_speedup() {
  constexpr int64_t kIters = 100000;  // 1.2 M instructions: ~0.3-1 ms per round
  double fma = 1e30, dot = 1e30;
  for (int r = 0; r < 3; ++r) {
    fma = std::min(fma, time_dot_loop(false, kIters));
    dot = std::min(dot, time_dot_loop(true, kIters));
  }
  return (32.0 / dot) / (16.0 / fma);
}

}  // namespace
LB_ISA_END
#endif  // LB_SGEMM_BF16

double bf16_dot_speedup() {
#if LB_SGEMM_BF16
  if (!sgemm_bf16_available()) return 0;
  static const double s = measure_dot_speedup();
  return s;
#else
  return 0;
#endif
}

bool sgemm_bf16_preferred() {
  if (!sgemm_bf16_available()) return false;
  if (amx_bf16_available()) return true;  // the tiles: several times any vector kernel
  static const int forced = [] {
    const char* v = std::getenv("LEANBACK_BF16_KERNEL");
    return v && *v ? (std::string(v) == "0" ? 0 : 1) : -1;
  }();
  if (forced >= 0) return forced == 1;
  return bf16_dot_speedup() >= 1.1;
}

bool sgemm_bf16_available() {
#if LB_SGEMM_BF16
  return isa_enabled(Isa::Avx512Bf16);
#else
  return false;
#endif
}

const char* sgemm_bf16_kernel_name() {
  if (!sgemm_bf16_available()) return "none";
  return amx_bf16_available() ? "amx-bf16 (32x32 tiles)" : "avx512-bf16 (8x48)";
}

namespace {

template <typename SA, typename SB>
void sgemm_bf16_entry(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                      const SA* a, int64_t lda, const SB* b, int64_t ldb, float beta, float* c,
                      int64_t ldc) {
#if LB_SGEMM_BF16
  if (!sgemm_bf16_available()) std::abort();  // callers check sgemm_bf16_available()
  if (amx_bf16_available()) {
    amx_sgemm_bf16(AmxRun::Hardware, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  sgemm_bf16_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  std::abort();
#endif
}

}  // namespace

void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  sgemm_bf16_entry(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const uint16_t* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  sgemm_bf16_entry(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  sgemm_bf16_entry(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void sgemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const uint16_t* a, int64_t lda, const uint16_t* b, int64_t ldb, float beta,
                float* c, int64_t ldc) {
  sgemm_bf16_entry(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace lb::cpu
