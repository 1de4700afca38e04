// The AVX2 integer GEMM (contract in int8_gemm_avx2.h). Two exact paths, chosen per call from
// the operands' ranges (scanned first, stopping as soon as a value rules the fast path out):
//
// Pairs (any int8): both operands sign-extended to int16 while packing, vpmaddwd (int16·int16,
// adjacent products summed into int32) then vpaddd. Why not vpmaddubsw for every input: it
// multiplies u8 by s8 and adds adjacent products into int16 with saturation, so full-range
// operands (±127, or a + 128 ≤ 255) can pass 32767. Measured on AMD EPYC family 25 model 1
// (Zen 3), 12 independent instructions: vpmaddwd + vpaddd 3.0 ns, vpfmadd231ps 2.0 ns,
// vpmaddubsw + vpaddw 2.9 ns: int16 pairs run at 1.33x the f32 FMA's multiply-adds.
//
// Quads (small ranges, e.g. HOT's 4-bit levels): A offset to unsigned (u = a + off, off =
// max|a|), vpmaddubsw on 4 consecutive k at once into int16, summed there for up to
// T = ⌊32767 / (2·max u·max|b|)⌋ quads (no saturation, no wrap), then widened into int32 with
// vpmaddwd against ones: 32 multiply-adds an instruction, 2.7x the f32 rate. The offset's
// surplus off·Σ_k b[k, n] is subtracted from each column's start value (as the VNNI kernel).
//
// Blocking, Goto-style, shared by both (a group is 2 k in int16 or 4 k in u8/s8: 4 bytes):
//  - B is packed once per call into panels of kNR = 16 columns over the whole contraction:
//    group q of a panel holds each column's group (one dword), so one 32-byte load feeds 8
//    columns. Groups past K are zero.
//  - A is packed per task and contraction block (≤ kKC values of k) into micro-panels of
//    kMR = 6 rows, group q holding each row's group, broadcast as one dword.
//  - The micro-kernel keeps a 6 x 16 tile in 12 ymm registers over one contraction block,
//    whose B sub-panel (≤ 16 KB) stays in L1 while the A block (96 rows, ≤ 96 KB) sits in L2.
//    Blocks after the first continue from the tile's int32 partial sums in a per-thread
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

#include "src/cpu/int8_quads.h"
#include "src/cpu/isa_target.h"

namespace lb::cpu {

LB_ISA_BEGIN_AVX2
namespace {

constexpr int kMR = 6;          // rows of the register tile
constexpr int kNR = 16;         // columns of the register tile (a B panel): two ymm of int32
constexpr int64_t kKC = 512;    // contraction block (a multiple of 4: blocks start on a group)
constexpr int64_t kMC = 96;     // rows of an A block (a multiple of kMR)
static_assert(kMC % kMR == 0 && kKC % 4 == 0);

// max |v| (128 for -128) over a (rows, cols) matrix with leading dimension ld; returns early,
// with a value above `limit`, once one is found.
int absmax_i8(const int8_t* p, int64_t rows, int64_t cols, int64_t ld, int limit) {
  int best = 0;
  for (int64_t r = 0; r < rows && best <= limit; ++r) {
    const int8_t* row = p + r * ld;
    __m256i m = _mm256_setzero_si256();
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32)
      m = _mm256_max_epu8(m, _mm256_abs_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c))));
    alignas(32) uint8_t lanes[32];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), m);
    for (uint8_t v : lanes) best = std::max<int>(best, v);
    for (; c < cols; ++c) best = std::max(best, row[c] < 0 ? -int{row[c]} : int{row[c]});
  }
  return best;
}

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

// A finished contraction block's tile: to the partial sums, or when `last` to the output (rows
// mv ≤ 6, columns nv ≤ 16 valid).
inline void finish_tile(const __m256i (&acc)[kMR][2], int32_t* part, int64_t ld_part, bool last,
                        const AmxInt8Output& ep, int64_t m, int64_t n, int mv, int nv) {
  if (!last) {
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < 2; ++v)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(part + r * ld_part + 8 * v), acc[r][v]);
    return;
  }
  for (int r = 0; r < mv; ++r)
    for (int v = 0; v < 2 && 8 * v < nv; ++v) store_out(acc[r][v], ep, m + r, n + 8 * v, std::min(8, nv - 8 * v));
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
  finish_tile(acc, part, ld_part, last, ep, m, n, mv, nv);
}

// ---------------------------------------------------------------- the quads path

// Panel p of B (all K) in quads: dst + p·⌈K/4⌉·4·kNR bytes, column n's b[4q..4q+3, n] at
// group q. comp[n] = -off · Σ_k b[k, n] for the panel's columns.
void pack_b_quads(bool trans_b, const int8_t* B, int64_t ldb, int64_t N, int64_t K, int64_t p, int off,
                  int8_t* dst, int32_t* comp) {
  const int64_t kq = (K + 3) / 4, n0 = p * kNR;
  int8_t* d = dst + p * kq * kNR * 4;
  for (int64_t q = 0; q < kq; ++q) {
    const int64_t k = 4 * q;
    int8_t* o = d + q * kNR * 4;
    if (!trans_b && k + 4 <= K && n0 + kNR <= N) {
      cpu::rows16_to_quads(B + k * ldb + n0, ldb, o);
    } else {
      cpu::edge_to_quads(trans_b, B, ldb, N, k, K, n0, kNR, o);
    }
  }
  // Column sums through the same instructions: 1·b summed over each quad.
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
  for (int64_t q = 0; q < kq; ++q) {
    const __m256i* g = reinterpret_cast<const __m256i*>(d + q * kNR * 4);
    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256(g)), ones16));
    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256(g + 1)), ones16));
  }
  const __m256i neg_off = _mm256_set1_epi32(-off);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(comp + n0), _mm256_mullo_epi32(s0, neg_off));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(comp + n0 + 8), _mm256_mullo_epi32(s1, neg_off));
}

// Four bytes plus `off` each, as u8 (every true sum in [0, 255]): bytewise, no carries.
inline uint32_t add_bytes(uint32_t v, uint32_t off4) {
  return ((v & 0x7F7F7F7Fu) + (off4 & 0x7F7F7F7Fu)) ^ ((v ^ off4) & 0x80808080u);
}

// A rows [m0, m0 + mc), k in [k0, k0 + kc), as u = a + off in micro-panels of quads (0 past
// mc and kc: B is zero there or the rows are dropped).
void pack_a_quads(bool trans_a, const int8_t* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
                  int off, uint8_t* dst) {
  const int64_t kq = (kc + 3) / 4, kfull = kc / 4;
  const uint32_t off4 = 0x01010101u * static_cast<uint32_t>(off);
  for (int64_t i = 0; i * kMR < mc; ++i) {
    uint8_t* d = dst + i * kq * kMR * 4;
    const int rows = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
    const int64_t m = m0 + i * kMR;
    for (int64_t q = 0; q < kq; ++q)
      for (int r = rows; r < kMR; ++r) std::memset(d + (q * kMR + r) * 4, 0, 4);
    if (!trans_a) {
      for (int r = 0; r < rows; ++r) {
        const int8_t* src = A + (m + r) * lda + k0;
        for (int64_t q = 0; q < kfull; ++q) {
          uint32_t v;
          std::memcpy(&v, src + 4 * q, 4);
          v = add_bytes(v, off4);
          std::memcpy(d + (q * kMR + r) * 4, &v, 4);
        }
        for (int64_t kk = 4 * kfull; kk < 4 * kq; ++kk)
          d[(kfull * kMR + r) * 4 + (kk - 4 * kfull)] = kk < kc ? static_cast<uint8_t>(src[kk] + off) : 0;
      }
      continue;
    }
    for (int64_t q = 0; q < kq; ++q)  // A stored (K, M): each k row holds the panel's rows side by side
      for (int j = 0; j < 4; ++j) {
        const int64_t kk = 4 * q + j;
        for (int r = 0; r < rows; ++r)
          d[(q * kMR + r) * 4 + j] = kk < kc ? static_cast<uint8_t>(A[(k0 + kk) * lda + m + r] + off) : 0;
      }
  }
}

// One 6 x 16 tile over kq quads, summing `span` quads in int16 between widenings; otherwise as
// micro_kernel (the first block starts from comp, the offset's correction).
// An empty asm that takes the sums in registers: it stops GCC from hoisting all six
// broadcasts above the rows (19 live registers: it then spilled eight int16 sums).
#define LB_KEEP_IN_REGISTERS(x, y) __asm__("" : "+x"(x), "+x"(y))

inline void micro_kernel_quads(int64_t kq, int64_t span, const uint8_t* a, const int8_t* b, const int32_t* comp,
                               int32_t* part, int64_t ld_part, bool first, bool last, const AmxInt8Output& ep,
                               int64_t m, int64_t n, int mv, int nv) {
  // The int32 sums stay in memory between widenings: the 12 int16 sums, the two B vectors and
  // the broadcast A fill the 16 registers (GCC spilled int16 sums when these competed).
  alignas(32) int32_t acc[kMR][kNR];
  for (int r = 0; r < kMR; ++r) std::memcpy(acc[r], first ? comp : part + r * ld_part, sizeof acc[r]);
  for (int64_t q0 = 0; q0 < kq; q0 += span) {
    const int64_t q1 = std::min(kq, q0 + span);
#define LB_INIT(r) __m256i h##r##0 = _mm256_setzero_si256(), h##r##1 = _mm256_setzero_si256();
    LB_INIT(0) LB_INIT(1) LB_INIT(2) LB_INIT(3) LB_INIT(4) LB_INIT(5)
#undef LB_INIT
#define LB_ROW(r)                                                          \
  {                                                                        \
    int32_t w;                                                             \
    std::memcpy(&w, a + 4 * (r), 4);                                       \
    const __m256i av = _mm256_set1_epi32(w);                               \
    h##r##0 = _mm256_add_epi16(h##r##0, _mm256_maddubs_epi16(av, b0));    \
    h##r##1 = _mm256_add_epi16(h##r##1, _mm256_maddubs_epi16(av, b1));    \
    LB_KEEP_IN_REGISTERS(h##r##0, h##r##1);                                \
  }
    for (int64_t q = q0; q < q1; ++q) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32));
      LB_ROW(0) LB_ROW(1) LB_ROW(2) LB_ROW(3) LB_ROW(4) LB_ROW(5)
      a += 4 * kMR;
      b += 4 * kNR;
    }
#undef LB_ROW
#define LB_WIDEN1(r, v)                                                                          \
  {                                                                                              \
    __m256i* s = reinterpret_cast<__m256i*>(acc[r] + 8 * (v));                                   \
    _mm256_store_si256(s, _mm256_add_epi32(_mm256_load_si256(s),                                 \
                                           _mm256_madd_epi16(h##r##v, _mm256_set1_epi16(1))));  \
  }
#define LB_WIDEN(r) LB_WIDEN1(r, 0) LB_WIDEN1(r, 1)
    LB_WIDEN(0) LB_WIDEN(1) LB_WIDEN(2) LB_WIDEN(3) LB_WIDEN(4) LB_WIDEN(5)
#undef LB_WIDEN
#undef LB_WIDEN1
  }
  __m256i tile[kMR][2];
  for (int r = 0; r < kMR; ++r)
    for (int v = 0; v < 2; ++v) tile[r][v] = _mm256_load_si256(reinterpret_cast<const __m256i*>(acc[r] + 8 * v));
  finish_tile(tile, part, ld_part, last, ep, m, n, mv, nv);
}

}  // namespace
LB_ISA_END

namespace {
// The blocked loops of both paths (the file comment). kQuads: off and span are the quads
// path's offset and int16 summing span.
template <bool kQuads>
void run_blocked(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                 const int8_t* B, int64_t ldb, const AmxInt8Output& ep, int off, int64_t span) {
  constexpr int64_t kGroup = kQuads ? 4 : 2;  // k values per 4-byte group
  const int64_t panels = (N + kNR - 1) / kNR, groups = (K + kGroup - 1) / kGroup;
  const int64_t kblocks = std::max<int64_t>(1, (K + kKC - 1) / kKC);
  const int64_t mblocks = (M + kMC - 1) / kMC;
  const int threads = omp_get_max_threads();
  const int64_t nchunks = std::min(panels, std::max<int64_t>(1, (2 * threads + mblocks - 1) / mblocks));
  const int64_t chunk_panels = (panels + nchunks - 1) / nchunks, ld_part = chunk_panels * kNR;
  const int64_t tasks = mblocks * nchunks;
  // Per thread: its packed A block and, over several contraction blocks, the int32 partial
  // sums of its task's tiles.
  const int64_t a_bytes = kMC * 4 * ((std::min(K, kKC) + kGroup - 1) / kGroup);
  const int64_t part_elems = kblocks > 1 ? kMC * ld_part : 0;
  Tensor bpack = Tensor::empty({std::max<int64_t>(1, panels * groups * kNR * 4)}, DType::I8, Device::cpu(),
                               MemTag::Workspace);
  Tensor comp = Tensor::empty({kQuads ? panels * kNR : 1}, DType::I32, Device::cpu(), MemTag::Workspace);
  Tensor apack = Tensor::empty({std::max<int64_t>(1, threads * a_bytes)}, DType::I8, Device::cpu(), MemTag::Workspace);
  Tensor part = Tensor::empty({std::max<int64_t>(1, threads * part_elems)}, DType::I32, Device::cpu(),
                              MemTag::Workspace);
  int8_t* bp_all = bpack.data<int8_t>();
  int32_t* comp_all = comp.data<int32_t>();
  const bool parallel = M * N * K > (int64_t{1} << 25);  // ~0.1 ms of work

#pragma omp parallel if (parallel)
  {
    const int tid = omp_get_thread_num();
    int8_t* ap = apack.data<int8_t>() + tid * a_bytes;
    int32_t* pt = part.data<int32_t>() + tid * part_elems;
#pragma omp for schedule(static)
    for (int64_t p = 0; p < panels; ++p) {
      if constexpr (kQuads)
        pack_b_quads(trans_b, B, ldb, N, K, p, off, bp_all, comp_all);
      else
        pack_b_panel(trans_b, B, ldb, N, K, p, reinterpret_cast<int16_t*>(bp_all));
    }
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t mb = t / nchunks, nc = t % nchunks;
      const int64_t m0 = mb * kMC, mc = std::min(kMC, M - m0);
      const int64_t p0 = nc * chunk_panels, p1 = std::min(panels, p0 + chunk_panels);
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        const int64_t k0 = kb * kKC, kc = std::min(kKC, K - k0), kg = (kc + kGroup - 1) / kGroup;
        if constexpr (kQuads)
          pack_a_quads(trans_a, A, lda, m0, mc, k0, kc, off, reinterpret_cast<uint8_t*>(ap));
        else
          pack_a(trans_a, A, lda, m0, mc, k0, kc, reinterpret_cast<int16_t*>(ap));
        for (int64_t p = p0; p < p1; ++p) {
          const int8_t* bp = bp_all + (p * groups + k0 / kGroup) * kNR * 4;
          const int nv = static_cast<int>(std::min<int64_t>(kNR, N - p * kNR));
          for (int64_t i = 0; i * kMR < mc; ++i) {
            const int mv = static_cast<int>(std::min<int64_t>(kMR, mc - i * kMR));
            const int8_t* ai = ap + i * kg * kMR * 4;
            int32_t* pi = pt + i * kMR * ld_part + (p - p0) * kNR;
            if constexpr (kQuads)
              micro_kernel_quads(kg, span, reinterpret_cast<const uint8_t*>(ai), bp, comp_all + p * kNR, pi, ld_part,
                                 kb == 0, kb + 1 == kblocks, ep, m0 + i * kMR, p * kNR, mv, nv);
            else
              micro_kernel(kg, reinterpret_cast<const int16_t*>(ai), reinterpret_cast<const int16_t*>(bp), pi,
                           ld_part, kb == 0, kb + 1 == kblocks, ep, m0 + i * kMR, p * kNR, mv, nv);
          }
        }
      }
    }
  }
}
}  // namespace

QuadsChoice int8_gemm_avx2_quads(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                                 int64_t lda, const int8_t* B, int64_t ldb) {
  // span = ⌊32767 / (2·max u·max|b|)⌋ with max u = 2·max|a| (u = a + max|a| ≤ 254): the quads
  // path when that is at least kMinSpan (fewer widenings than quads).
  constexpr int64_t kMinSpan = 4, kInt16Max = 32767;
  const int bmax = std::max(1, absmax_i8(B, trans_b ? N : K, trans_b ? K : N, ldb, 128));
  const int64_t a_limit = std::min<int64_t>(127, kInt16Max / (kMinSpan * 2 * 2 * bmax));
  if (a_limit < 1) return {};
  const int amax = absmax_i8(A, trans_a ? K : M, trans_a ? M : K, lda, static_cast<int>(a_limit));
  if (amax > a_limit) return {};
  return {amax, kInt16Max / (2 * std::max(1, 2 * amax) * bmax)};
}

void int8_gemm_avx2(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                    const int8_t* B, int64_t ldb, const AmxInt8Output& ep) {
  const QuadsChoice q = int8_gemm_avx2_quads(trans_a, trans_b, M, N, K, A, lda, B, ldb);
  if (q.span > 0)
    run_blocked<true>(trans_a, trans_b, M, N, K, A, lda, B, ldb, ep, q.offset, q.span);
  else
    run_blocked<false>(trans_a, trans_b, M, N, K, A, lda, B, ldb, ep, 0, 0);
}

}  // namespace lb::cpu

#endif  // LB_INT8_GEMM_AVX2
