// The AVX2 integer GEMM (contract in int8_gemm_avx2.h).
//
// Why int16 pairs (vpmaddwd) and not vpmaddubsw: vpmaddubsw multiplies u8 by s8 and adds
// adjacent products into int16 with saturation, so with full-range operands (±127, or the
// VNNI kernel's a + 128 ≤ 255) a pair of products can pass 32767 and the sum is no longer
// exact. Both operands sign-extended to int16 while packing, vpmaddwd (int16·int16, adjacent
// products summed into int32) is exact for every int8 input at the same multiply rate: 16
// multiply-adds an instruction, twice the f32 FMA's 8.
//
// Blocking, Goto-style:
//  - B is packed once per call into panels of kNR = 16 columns over the whole contraction:
//    pair q of a panel holds, for each column n, (b[2q, n], b[2q + 1, n]) as two int16 (one
//    dword), so one 32-byte load feeds vpmaddwd for 8 columns. Pairs past K are zero.
//  - A is packed per task and contraction block (≤ kKC values of k) into micro-panels of
//    kMR = 6 rows: pair q holds each row's (a[m, 2q], a[m, 2q + 1]), broadcast as one dword.
//  - The micro-kernel keeps a 6 x 16 int32 tile in 12 ymm registers over one contraction
//    block, whose B sub-panel (16 KB) stays in L1 while the A block (96 rows, 96 KB) sits in
//    L2. Blocks after the first continue from the tile's int32 partial sums in a per-thread
//    buffer; the last block runs the epilogue (int32 out, or the dequantising f32 one).
//  - Tasks are (block of kMC rows, chunk of panels); columns are split too when there are few
//    row blocks, so every thread has work.
#include "src/cpu/int8_gemm_avx2.h"

#if LB_INT8_GEMM_AVX2
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "lb/core/tensor.h"

#include "src/cpu/isa_target.h"

namespace lb::cpu {

LB_ISA_BEGIN_AVX2
namespace {

constexpr int kMR = 6;          // rows of the register tile
constexpr int kNR = 16;         // columns of the register tile (a B panel): two ymm of int32
constexpr int64_t kKC = 512;    // contraction block (even, so blocks start on a pair)
constexpr int64_t kMC = 96;     // rows of an A block (a multiple of kMR)
static_assert(kMC % kMR == 0 && kKC % 2 == 0);

// Panel p of B (all K) into dst + p·⌈K/2⌉·2·kNR (the file comment's layout).
void pack_b_panel(bool trans_b, const int8_t* B, int64_t ldb, int64_t N, int64_t K, int64_t p, int16_t* dst) {
  const int64_t kp = (K + 1) / 2, n0 = p * kNR;
  int16_t* d = dst + p * kp * kNR * 2;
  if (trans_b) {  // column n's values are contiguous: one pass per column
    for (int c = 0; c < kNR; ++c) {
      const int64_t n = n0 + c;
      const int8_t* src = n < N ? B + n * ldb : nullptr;
      for (int64_t q = 0; q < kp; ++q)
        for (int j = 0; j < 2; ++j) {
          const int64_t k = 2 * q + j;
          d[(q * kNR + c) * 2 + j] = src && k < K ? src[k] : int16_t{0};
        }
    }
    return;
  }
  for (int64_t q = 0; q < kp; ++q) {
    const int64_t k = 2 * q;
    int16_t* o = d + q * kNR * 2;
    if (k + 2 <= K && n0 + kNR <= N) {
      // Two rows of 16 bytes, widened, interleaved into 16 column pairs. unpack works within
      // 128-bit lanes: lo holds columns 0-3 | 8-11, hi 4-7 | 12-15.
      const __m256i r0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(B + k * ldb + n0)));
      const __m256i r1 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(B + (k + 1) * ldb + n0)));
      const __m256i lo = _mm256_unpacklo_epi16(r0, r1), hi = _mm256_unpackhi_epi16(r0, r1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    } else {
      for (int c = 0; c < kNR; ++c)
        for (int j = 0; j < 2; ++j) {
          const int64_t n = n0 + c, kk = k + j;
          o[2 * c + j] = n < N && kk < K ? B[kk * ldb + n] : int16_t{0};
        }
    }
  }
}

// A rows [m0, m0 + mc), k in [k0, k0 + kc), into micro-panels (zero past mc and kc).
void pack_a(bool trans_a, const int8_t* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int16_t* dst) {
  const int64_t kp = (kc + 1) / 2, kfull = kc / 2;
  for (int64_t i = 0; i * kMR < mc; ++i) {
    int16_t* d = dst + i * kp * kMR * 2;
    const int rows = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
    if (rows < kMR)
      for (int64_t q = 0; q < kp; ++q)
        for (int r = rows; r < kMR; ++r) d[(q * kMR + r) * 2] = d[(q * kMR + r) * 2 + 1] = 0;
    const int64_t m = m0 + i * kMR;
    if (trans_a) {  // A stored (K, M): each k row holds the panel's rows side by side
      for (int64_t q = 0; q < kp; ++q)
        for (int j = 0; j < 2; ++j) {
          const int64_t kk = 2 * q + j;
          const int8_t* src = kk < kc ? A + (k0 + kk) * lda + m : nullptr;
          for (int r = 0; r < rows; ++r) d[(q * kMR + r) * 2 + j] = src ? src[r] : int16_t{0};
        }
      continue;
    }
    for (int r = 0; r < rows; ++r) {
      const int8_t* src = A + (m + r) * lda + k0;
      for (int64_t q = 0; q < kfull; ++q) {
        d[(q * kMR + r) * 2] = src[2 * q];
        d[(q * kMR + r) * 2 + 1] = src[2 * q + 1];
      }
      if (kp > kfull) {
        d[(kfull * kMR + r) * 2] = src[2 * kfull];
        d[(kfull * kMR + r) * 2 + 1] = 0;
      }
    }
  }
}

// Lanes [0, cols) of 8 set (the masked loads and stores of a tile's last columns).
inline __m256i lane_mask(int cols) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The finished 8 columns `acc` of row `row` from column `col` (cols ≤ 8 of them valid).
inline void store_out(__m256i acc, const AmxInt8Output& ep, int64_t row, int64_t col, int cols) {
  const __m256i mask = lane_mask(cols);
  if (ep.to_f32) {
    const float s = (ep.row_scale ? ep.row_scale[row] : 1.f) * ep.alpha;
    float* o = ep.out + row * ep.ld + col;
    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(s));
    if (ep.col_scale) y = _mm256_mul_ps(y, _mm256_maskload_ps(ep.col_scale + col, mask));
    if (ep.accumulate) y = _mm256_add_ps(_mm256_maskload_ps(o, mask), y);
    _mm256_maskstore_ps(o, mask, y);
  } else {
    int* o = reinterpret_cast<int*>(ep.c + row * ep.ld + col);
    if (ep.accumulate) acc = _mm256_add_epi32(acc, _mm256_maskload_epi32(o, mask));
    _mm256_maskstore_epi32(o, mask, acc);
  }
}

// One 6 x 16 tile over kp pairs: from zero (first) or the partial sums at `part` (rows ld_part
// apart); to `part` again, or when `last` to the output (rows mv ≤ 6, columns nv ≤ 16 valid).
inline void micro_kernel(int64_t kp, const int16_t* a, const int16_t* b, int32_t* part, int64_t ld_part, bool first,
                         bool last, const AmxInt8Output& ep, int64_t m, int64_t n, int mv, int nv) {
  // 12 named accumulators: GCC spills an indexed __m256i array to the stack.
#define LB_INIT(r)                                                                          \
  __m256i c##r##0 = _mm256_setzero_si256(), c##r##1 = _mm256_setzero_si256();               \
  if (!first) {                                                                             \
    c##r##0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(part + (r) * ld_part));     \
    c##r##1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(part + (r) * ld_part + 8)); \
  }
  LB_INIT(0) LB_INIT(1) LB_INIT(2) LB_INIT(3) LB_INIT(4) LB_INIT(5)
#undef LB_INIT
#define LB_ROW(r)                                                     \
  {                                                                   \
    int32_t w;                                                        \
    std::memcpy(&w, a + 2 * (r), 4);                                  \
    const __m256i av = _mm256_set1_epi32(w);                          \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(av, b0));   \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(av, b1));   \
  }
  for (int64_t q = 0; q < kp; ++q) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
    LB_ROW(0) LB_ROW(1) LB_ROW(2) LB_ROW(3) LB_ROW(4) LB_ROW(5)
    a += 2 * kMR;
    b += 2 * kNR;
  }
#undef LB_ROW
  const __m256i acc[kMR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  if (!last) {
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < 2; ++v)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(part + r * ld_part + 8 * v), acc[r][v]);
    return;
  }
  for (int r = 0; r < mv; ++r)
    for (int v = 0; v < 2 && 8 * v < nv; ++v) store_out(acc[r][v], ep, m + r, n + 8 * v, std::min(8, nv - 8 * v));
}

}  // namespace
LB_ISA_END

void int8_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                    const int8_t* B, int64_t ldb, const AmxInt8Output& ep) {
  const int64_t panels = (N + kNR - 1) / kNR, kp_all = (K + 1) / 2;
  const int64_t kblocks = std::max<int64_t>(1, (K + kKC - 1) / kKC);
  const int64_t mblocks = (M + kMC - 1) / kMC;
  const int threads = omp_get_max_threads();
  const int64_t nchunks = std::min(panels, std::max<int64_t>(1, (2 * threads + mblocks - 1) / mblocks));
  const int64_t chunk_panels = (panels + nchunks - 1) / nchunks, ld_part = chunk_panels * kNR;
  const int64_t tasks = mblocks * nchunks;
  // Per thread: its packed A block (int16) and, over several contraction blocks, the int32
  // partial sums of its task's tiles.
  const int64_t a_elems = kMC * 2 * ((std::min(K, kKC) + 1) / 2);
  const int64_t part_elems = kblocks > 1 ? kMC * ld_part : 0;
  Tensor bpack = Tensor::empty({std::max<int64_t>(1, 2 * panels * kp_all * kNR * 2)}, DType::I8, Device::cpu(),
                               MemTag::Workspace);
  Tensor apack = Tensor::empty({std::max<int64_t>(1, threads * a_elems * 2)}, DType::I8, Device::cpu(),
                               MemTag::Workspace);
  Tensor part = Tensor::empty({std::max<int64_t>(1, threads * part_elems)}, DType::I32, Device::cpu(),
                              MemTag::Workspace);
  int16_t* bp_all = reinterpret_cast<int16_t*>(bpack.data<int8_t>());
  const bool parallel = M * N * K > (int64_t{1} << 25);  // ~0.1 ms of work

#pragma omp parallel if (parallel)
  {
    const int tid = omp_get_thread_num();
    int16_t* ap = reinterpret_cast<int16_t*>(apack.data<int8_t>()) + tid * a_elems;
    int32_t* pt = part.data<int32_t>() + tid * part_elems;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) pack_b_panel(trans_b, B, ldb, N, K, p, bp_all);
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t mb = t / nchunks, nc = t % nchunks;
      const int64_t m0 = mb * kMC, mc = std::min(kMC, M - m0);
      const int64_t p0 = nc * chunk_panels, p1 = std::min(panels, p0 + chunk_panels);
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        const int64_t k0 = kb * kKC, kc = std::min(kKC, K - k0), kp = (kc + 1) / 2;
        pack_a(trans_a, A, lda, m0, mc, k0, kc, ap);
        for (int64_t p = p0; p < p1; ++p) {
          const int16_t* bp = bp_all + (p * kp_all + k0 / 2) * kNR * 2;
          const int nv = static_cast<int>(std::min<int64_t>(kNR, N - p * kNR));
          for (int64_t i = 0; i * kMR < mc; ++i) {
            const int mv = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
            micro_kernel(kp, ap + i * kp * kMR * 2, bp, pt + i * kMR * ld_part + (p - p0) * kNR, ld_part, kb == 0,
                         kb + 1 == kblocks, ep, m0 + i * kMR, p * kNR, mv, nv);
          }
        }
      }
    }
  }
}

}  // namespace lb::cpu

#endif  // LB_INT8_GEMM_AVX2
