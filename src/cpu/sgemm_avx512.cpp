// Single-threaded AVX-512 float GEMM (contract in sgemm_avx512.h).
//
// Why our own: this machine class runs OpenBLAS with OPENBLAS_CORETYPE=Haswell (AVX2 kernels,
// ymm FMAs), which caps sgemm at about half of what the Zen 5 cores do with zmm FMAs.
//
// Goto/BLIS layout, all four transpositions handled by the packing, so the micro-kernel sees
// one layout:
//  - B is packed per (kc, nc) block into panels of kNR = 48 columns: row k of a panel is 48
//    consecutive floats (zero past N).
//  - A is packed per (mc, kc) block into micro-panels of kMR = 8 rows: for each k, the 8
//    values a[m..m+7, k] (zero past M).
//  - The micro-kernel keeps an 8 x 48 tile of C in 24 zmm accumulators (3 vectors per row):
//    per k, 3 loads of B, 8 broadcasts of A, 24 FMAs.
//  - Loop order (BLIS with the roles of A and B swapped, since C is row-major and vectors run
//    along n): A block (kMC x kc) in L2/L3, B block (kc x nc) in L2, one A micro-panel
//    (kc x 8, 8 KiB) stays in L1 while the B panels of the block stream past it.
// Sources whose rows run along k (A not transposed, B transposed) are packed panel by panel
// with 8 x 8 register transposes; the others a few panels at a time, row by row (see
// pack_a_rows). Packing prefetches its source: in the Winograd convolution's 16 back-to-back
// products on 1 MiB operands, two threads at once ran at half speed without it.
// An operand whose values are each used at most kDirectReuse = 128 times (A when n <= 128,
// B when m <= 128) is not packed at all: the kernel reads it in place (A from its rows or
// columns, B from its rows), which on the Winograd shapes (64..128 channels by 1024 tiles)
// gained 5-25%. The next C tile is prefetched while the current one is computed.
//
// Measured on the 2-core EPYC (Zen 5) dev machine at load average about 1 (it is shared with
// other jobs). `leanback bench gemm`, one thread, medians, GFLOP/s ours vs OpenBLAS 0.3.21
// Haswell: conv forward 64x1024x576 NN 175-205 vs 118, 512x1024x4608 NN 214 vs 123; data
// grad 1152x1024x128 TN 237 vs 123; filter grad 64x576x1024 NT 207 vs 113, 512x4608x1024
// NT 220 vs 122, 64x576x8192 NT 170 vs 103; Winograd 1024x64x64 NT 267 vs 120, 64x64x1024
// TN 247 vs 116, 256x256x256 NT 222 vs 128; Linear 4096x3072x768 NN 225 vs 123, 3072x768x4096
// TN 215 vs 125 (best single calls run 5-20% above the medians, most on the small-M
// products). The kernel alone on L1-resident panels: 266 GFLOP/s, the zmm FMA peak.
// Two threads at once (`bench gemm --threads 2`): 163-260 per thread (OpenBLAS 100-128),
// no collapse; the small-M products (M = 64, B of 2.4-9.4 MiB read once) lose the most.
// Training steps (2 threads), OpenBLAS -> this kernel, two interleaved rounds at load
// 0.3-1.2: resnet18 673.3 / 654.7 -> 415.1 / 411.0 ms, linear_bwd 239.9 / 238.9 -> 135.0 /
// 133.6 ms, bert_mini 463.3 / 460.6 -> 292.0 / 291.8 ms.
// Tried and dropped: kc 384 (-4%), nc 240 (no better), transposing packs with k outermost
// (slower). Not tried: other tile shapes (8 x 48 reaches the peak on L1 data and 8 divides
// the channel counts).
#include "src/cpu/sgemm_avx512.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "src/cpu/cpu_features.h"
#include "src/cpu/gemm_blocking.h"
#include "src/cpu/isa_target.h"

#if defined(__x86_64__)
#define LB_SGEMM_AVX512 1
#include <immintrin.h>
// GCC 12 warns inside its own intrinsic headers (_mm512_undefined_*: GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace lb::cpu {

#if LB_SGEMM_AVX512
LB_ISA_BEGIN_AVX512
namespace {

constexpr int kMR = 8;               // rows of the register tile (broadcast from packed A)
constexpr int kNV = 3;               // zmm vectors per tile row
constexpr int kNR = 16 * kNV;        // columns of the register tile (a packed B panel)
constexpr int64_t kKC = 256;         // contraction block (A micro-panel: 8 KiB, in L1)
constexpr int64_t kNC = 480;         // columns of a packed B block (multiple of kNR)
constexpr int64_t kMC = 1536;        // rows of a packed A block (multiple of kMR)
constexpr int64_t kDirectReuse = 128;  // see direct_a / direct_b in sgemm_avx512
static_assert(kNC % kNR == 0 && kMC % kMR == 0);

// Per-thread packing buffers.
thread_local gemm_detail::PackBuffer<float> t_apack, t_bpack;

// 8 rows of 8 floats (src rows `ls` apart) -> 8 rows of 8 floats (dst rows `ld` apart),
// transposed.
inline void transpose8x8(const float* src, int64_t ls, float* dst, int64_t ld) {
  const __m256 r0 = _mm256_loadu_ps(src + 0 * ls), r1 = _mm256_loadu_ps(src + 1 * ls);
  const __m256 r2 = _mm256_loadu_ps(src + 2 * ls), r3 = _mm256_loadu_ps(src + 3 * ls);
  const __m256 r4 = _mm256_loadu_ps(src + 4 * ls), r5 = _mm256_loadu_ps(src + 5 * ls);
  const __m256 r6 = _mm256_loadu_ps(src + 6 * ls), r7 = _mm256_loadu_ps(src + 7 * ls);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * ld, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + 1 * ld, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ld, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ld, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ld, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ld, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ld, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ld, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// Width of the next B panel when `rem` columns are left: kNR, but a tail of 49..64 columns
// is split 32 + rest, so no panel runs the 16-wide kernel (load-bound: 9 loads per 8 FMAs)
// when it can be avoided.
inline int64_t panel_width(int64_t rem) { return rem > 64 ? kNR : rem > kNR ? 32 : rem; }

inline __mmask16 tail_mask(int64_t count) {  // the first min(count, 16) lanes (count >= 0)
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << count) - 1);
}

inline void prefetch(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// One panel of width W (kMR for A, kNR for B) from a source whose runs along k are
// contiguous (A not transposed, B transposed): dst[k·W + i] = src[i·si + k] for k < kc,
// i < w, then zeros (see wpad). `next`: the source of the panel packed after this one (its
// first next_w runs are prefetched), or null.
template <int W>
void pack_panel_t(const float* src, int64_t si, int64_t kc, int w, float* dst,
                  const float* next = nullptr, int next_w = 0) {
  static_assert(W % 8 == 0);
  // 8 x 8 blocks go through registers, 8 runs at a time, while the next 8 runs (of this
  // panel, else of the next one) are prefetched. (Tried and slower: k outside, 16 at a time,
  // so destination lines complete at once; and slabs of 64 k. The runs are often a multiple
  // of 4 KiB apart, i.e. in the same L1 sets, so more than 8 open at once evict each other.)
  const int wfull = w / 8 * 8;
  const int64_t kfull = kc / 8 * 8;
  for (int i0 = 0; i0 < wfull; i0 += 8) {
    const float* pf = i0 + 8 < w ? src + (i0 + 8) * si : next;
    const int pf_rows = i0 + 8 < w ? std::min(8, w - i0 - 8) : (next ? std::min(8, next_w) : 0);
    for (int64_t k0 = 0; k0 < kfull; k0 += 8) {
      if (k0 % 16 == 0)
        for (int q = 0; q < pf_rows; ++q) prefetch(pf + q * si + k0);
      transpose8x8(src + i0 * si + k0, si, dst + k0 * W + i0, W);
    }
  }
  for (int i = 0; i < wfull; ++i)  // the last kc % 8 values of k
    for (int64_t k = kfull; k < kc; ++k) dst[k * W + i] = src[i * si + k];
  // The last w % 8 runs, then zeros up to what the kernel reads (all 8 rows of an A panel,
  // whole 16-column vectors of a B panel).
  const int wpad = W == kMR ? W : std::min(W, (w + 15) / 16 * 16);
  for (int i = wfull; i < wpad; ++i) {
    if (i < w) {
      for (int64_t k = 0; k < kc; ++k) dst[k * W + i] = src[i * si + k];
    } else {
      for (int64_t k = 0; k < kc; ++k) dst[k * W + i] = 0.f;
    }
  }
}

// Copy packing of a block whose source rows run along the panel width (op(A) stored (K, M),
// or B stored (K, N)): a few panels at a time, row by row, so each source line is read
// once and in full, and only a few destination streams are open at once. (Panel by panel,
// the panels' halves of one line are read at different times, and when the row stride is a
// multiple of 2 KiB all rows share a couple of L1 sets, so the second read misses; all
// panels at once, the destination streams, 8·kc or 48·kc floats apart, share one L1 set.)
// A block: mc values per row into kMR-wide micro-panels (zero past mc).
void pack_a_rows(const float* src, int64_t sk, int64_t kc, int64_t mc, float* dst) {
  constexpr int64_t kGroup = 8;  // micro-panels per pass: 4 source lines per row
  constexpr int64_t kAhead = 8;  // rows prefetched ahead (the source may be in memory)
  const int64_t np = (mc + kMR - 1) / kMR;
  for (int64_t p0 = 0; p0 < np; p0 += kGroup) {
    const int64_t p1 = std::min(np, p0 + kGroup);
    for (int64_t k = 0; k < kc; ++k) {
      const float* row = src + k * sk;
      if (k + kAhead < kc)
        for (int64_t p = p0; p < p1; p += 2) prefetch(row + kAhead * sk + p * kMR);
      for (int64_t p = p0; p < p1; ++p) {
        const __mmask8 mask = static_cast<__mmask8>(tail_mask(mc - p * kMR));
        _mm256_store_ps(dst + p * kMR * kc + k * kMR, _mm256_maskz_loadu_ps(mask, row + p * kMR));
      }
    }
  }
}

// B block: nc values per row into panels of panel_width() columns, kNR apart (zero padded
// to whole 16-column vectors).
void pack_b_rows(const float* src, int64_t sk, int64_t kc, int64_t nc, float* dst) {
  constexpr int kGroup = 4;      // panels per pass
  constexpr int64_t kAhead = 8;  // rows prefetched ahead
  int64_t j0 = 0, p0 = 0;
  while (j0 < nc) {
    int64_t pos[kGroup], width[kGroup];
    int cnt = 0;
    for (int64_t j = j0; j < nc && cnt < kGroup; j += width[cnt++]) {
      pos[cnt] = j;
      width[cnt] = panel_width(nc - j);
    }
    for (int64_t k = 0; k < kc; ++k) {
      const float* row = src + k * sk;
      if (k + kAhead < kc)
        for (int q = 0; q < cnt; ++q)
          for (int v = 0; v < kNV; ++v) prefetch(row + kAhead * sk + pos[q] + 16 * v);
      for (int q = 0; q < cnt; ++q) {
        float* d = dst + (p0 + q) * kNR * kc + k * kNR;
        for (int v = 0; v < (width[q] + 15) / 16; ++v)  // the vectors the kernel reads
          _mm512_store_ps(d + 16 * v, _mm512_maskz_loadu_ps(tail_mask(std::max<int64_t>(0, width[q] - 16 * v)),
                                                            row + pos[q] + 16 * v));
      }
    }
    j0 = pos[cnt - 1] + width[cnt - 1];
    p0 += cnt;
  }
}

// One register tile: C[0..mr, 0..nr) (ldc apart) = alpha·Σ_k a_k ⊗ b_k + beta·C, where
// beta_zero means C is not read. b_k: 16·NV floats at b + k·ldb_k (a packed panel, or
// B's row in place). a_k: the kMR values a[k·lda_k + r] (packed, or op(A) stored (K, M) in
// place), or with kARows a[r·lda_k + k] (A stored (M, K) in place). c_next: the tile
// computed after this one, prefetched (its C lines are read-modify-write, and products with
// short k give the hardware no time to fetch them).
struct Tile {
  int64_t kc;
  const float* a;
  int64_t lda_k;
  const float* b;
  int64_t ldb_k;
  float* c;
  int64_t ldc;
  const float* c_next;
  int mr, nr;
  float alpha, beta;
  bool beta_zero;
};

// Not inlined: inside the driver GCC 12 ran short of registers and kept one of B's vectors
// on the stack in the k loop (a store per k and a memory operand on every third FMA).
template <int NV, bool kARows>
__attribute__((noinline)) void micro_kernel(const Tile& t) {
  const int64_t kc = t.kc, lda_k = t.lda_k, ldb_k = t.ldb_k, ldc = t.ldc;
  const float* a = t.a;
  const float* b = t.b;
  float* c = t.c;
  const int mr = t.mr, nr = t.nr;
  __m512 acc[kMR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int r = 0; r < mr; ++r)
    for (int v = 0; v < NV; ++v) prefetch(c + r * ldc + 16 * v);
  if (t.c_next)  // (may reach past the end of C: prefetches do not fault)
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < kNV; ++v) prefetch(t.c_next + r * ldc + 16 * v);
  const float* a0 = a;
  const float* a4 = kARows ? a + 4 * lda_k : a;
  for (int64_t k = 0; k < kc; ++k) {
    __m512 bv[NV];
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
#pragma GCC unroll 8
    for (int r = 0; r < kMR; ++r) {
      __m512 av;
      if constexpr (kARows)
        av = _mm512_set1_ps(r < 4 ? a0[r * lda_k + k] : a4[(r - 4) * lda_k + k]);
      else
        av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
    if constexpr (!kARows) a += lda_k;
    b += ldb_k;
  }
  const __m512 va = _mm512_set1_ps(t.alpha), vb = _mm512_set1_ps(t.beta);
#pragma GCC unroll 8
  for (int r = 0; r < kMR; ++r) {
    if (r >= mr) break;
    float* cr = c + r * ldc;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      const __mmask16 mask = tail_mask(nr - 16 * v);
      __m512 y = _mm512_mul_ps(acc[r][v], va);
      if (!t.beta_zero) y = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, cr + 16 * v), vb, y);
      _mm512_mask_storeu_ps(cr + 16 * v, mask, y);
    }
  }
}

// The narrowest kernel that covers the tile's columns.
template <bool kARows>
inline void run_tile(const Tile& t) {
  if (t.nr > 32)
    micro_kernel<3, kARows>(t);
  else if (t.nr > 16)
    micro_kernel<2, kARows>(t);
  else
    micro_kernel<1, kARows>(t);
}

using gemm_detail::balanced_block;

void sgemm_impl(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc) {
  if (gemm_detail::gemm_without_product(m, n, k, alpha, beta, c, ldc)) return;
  const int64_t kc_max = balanced_block(k, kKC, 8);
  const int64_t nc_max = balanced_block(n, kNC, kNR);
  const int64_t mc_max = balanced_block(m, kMC, kMR);
  // Operands read in place when packing would not pay: each value of A is used n times,
  // each of B m times. Whole micro-panels / vectors only, so nothing past the operands is
  // read. (B stored transposed is always packed: the kernel loads B along n.)
  const bool direct_a = m % kMR == 0 && n <= kDirectReuse;
  const bool direct_b = !trans_b && n % 16 == 0 && m <= kDirectReuse;
  float* apack = direct_a ? nullptr : t_apack.get(static_cast<size_t>((mc_max + kMR - 1) / kMR * kMR * kc_max));
  float* bpack = direct_b ? nullptr : t_bpack.get(static_cast<size_t>((nc_max + kNR - 1) / kNR * kNR * kc_max));

  for (int64_t ic = 0; ic < m; ic += mc_max) {
    const int64_t mc = std::min(mc_max, m - ic);
    for (int64_t pc = 0; pc < k; pc += kc_max) {
      const int64_t kc = std::min(kc_max, k - pc);
      const bool first = pc == 0;
      const float beta_k = first ? beta : 1.f;
      const bool beta_zero = first && beta == 0.f;
      if (!direct_a && trans_a) {  // op(A) stored (K, M)
        pack_a_rows(a + pc * lda + ic, lda, kc, mc, apack);
      } else if (!direct_a) {
        for (int64_t i = 0; i < mc; i += kMR) {
          const int64_t in = i + kMR;
          pack_panel_t<kMR>(a + (ic + i) * lda + pc, lda, kc,
                            static_cast<int>(std::min<int64_t>(kMR, mc - i)), apack + i * kc,
                            in < mc ? a + (ic + in) * lda + pc : nullptr,
                            static_cast<int>(std::min<int64_t>(kMR, mc - in)));
        }
      }
      for (int64_t jc = 0; jc < n; jc += nc_max) {
        const int64_t nc = std::min(nc_max, n - jc);
        if (!direct_b && !trans_b) {  // B stored (K, N)
          pack_b_rows(b + pc * ldb + jc, ldb, kc, nc, bpack);
        } else if (!direct_b) {
          int64_t p = 0;
          for (int64_t j = 0; j < nc; j += panel_width(nc - j), ++p) {
            const int64_t w = panel_width(nc - j), jn = j + w;
            pack_panel_t<kNR>(b + (jc + j) * ldb + pc, ldb, kc, static_cast<int>(w),
                              bpack + p * kNR * kc, jn < nc ? b + (jc + jn) * ldb + pc : nullptr,
                              static_cast<int>(jn < nc ? panel_width(nc - jn) : 0));
          }
        }
        // The kernel's view of A: k-major (packed, or op(A) stored (K, M)) with stride lda_k
        // between k, or 8 rows of A stored (M, K) lda_k apart.
        const bool a_rows = direct_a && !trans_a;
        const int64_t lda_k = direct_a ? lda : kMR, ldb_k = direct_b ? ldb : kNR;
        for (int64_t i = 0; i < mc; i += kMR) {
          const int mr = static_cast<int>(std::min<int64_t>(kMR, mc - i));
          const float* ap = !direct_a ? apack + i * kc
                             : trans_a ? a + pc * lda + ic + i
                                       : a + (ic + i) * lda + pc;
          int64_t p = 0;
          for (int64_t j = 0; j < nc; j += panel_width(nc - j), ++p) {
            const int nr = static_cast<int>(panel_width(nc - j));
            const float* bp = direct_b ? b + pc * ldb + jc + j : bpack + p * kNR * kc;
            float* cp = c + (ic + i) * ldc + jc + j;
            const float* cn = j + nr < nc ? cp + nr : i + kMR < mc ? c + (ic + i + kMR) * ldc + jc : nullptr;
            const Tile t{kc, ap, lda_k, bp, ldb_k, cp, ldc, cn, mr, nr, alpha, beta_k, beta_zero};
            if (a_rows)
              run_tile<true>(t);
            else
              run_tile<false>(t);
          }
        }
      }
    }
  }
}

}  // namespace
LB_ISA_END
#endif  // LB_SGEMM_AVX512

bool sgemm_avx512_available() {
#if LB_SGEMM_AVX512
  return isa_enabled(Isa::Avx512);
#else
  return false;
#endif
}

const char* sgemm_kernel_name() { return sgemm_avx512_available() ? "avx512 (8x48)" : "openblas"; }

void sgemm_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                  int64_t ldc) {
#if LB_SGEMM_AVX512
  if (!sgemm_avx512_available()) std::abort();  // callers check sgemm_avx512_available()
  sgemm_impl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda;
  (void)b, (void)ldb, (void)beta, (void)c, (void)ldc;
  std::abort();  // callers check sgemm_avx512_available()
#endif
}

}  // namespace lb::cpu
