// Integer GEMM (int8 x int8 -> int32) for the quantised backward passes; contract in
// int8_gemm.h.
//
// AVX-512 VNNI kernel, Goto-style:
//  - B is packed per contraction block (≤ kKC values of k) into panels of kNR = 64 columns;
//    within a panel, k-quad q holds for each column n the 4 bytes b[4q..4q+3, n], so one
//    64-byte load feeds vpdpbusd for 16 columns. Rows past K are zero.
//  - A is packed per block of kMC rows into micro-panels of kMR = 6 rows: for each k-quad,
//    the 4 bytes of each row, XOR 0x80 (= a + 128 as u8), broadcast as one dword.
//  - The micro-kernel keeps a 6 x 64 int32 tile in 24 zmm registers over the whole block and
//    starts from -128·Σ_k b[k, n] (the offset compensation), so no correction pass is needed.
//  - Loop order per thread: A block (kMC x kc, L2) outside, B panel (kc x 64, L2) next, then
//    the micro-panels; B panels are re-read from L3 once per A block.
// Contractions longer than kKC run block by block with int32 partials in an (M, N) workspace.
//
// Why not oneDNN (Debian libdnnl 2.6, dnnl_gemm_s8s8s32)? Measured on this 2-core EPYC
// (Zen 5, AVX-512 VNNI) on the linear_bwd shapes, best of 10-15: single thread, ours 29.9 ms
// vs oneDNN 28.6 ms for (4096 x 3072)(3072 x 768) and 11.3 vs 11.1 ms for the (3072 x 2048)ᵀ
// (2048 x 768) weight-gradient shape (both ~400+ GMAC/s; OpenBLAS sgemm: 246 and 119 ms).
// With 2 threads on a machine oversubscribed by other work oneDNN was 10-30% faster under
// OMP_WAIT_POLICY=active and equal or slower under passive. Near parity, ours keeps no extra
// dependency and fuses the dequantisation (per-row and per-column scales) into the epilogue,
// which oneDNN's integer GEMM API cannot (it returns int32 C).
#include "src/cpu/int8_gemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "lb/core/error.h"
#include "lb/core/tensor.h"

#include "src/backend/int8_gemm.h"
#include "src/cpu/amx_gemm.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/int8_gemm_avx2.h"
#include "src/cpu/isa_target.h"

#if defined(__x86_64__)
#define LB_INT8_GEMM_VNNI 1
#include <immintrin.h>

#include "src/cpu/int8_quads.h"
// GCC 12 warns inside its own intrinsic headers (_mm512_undefined_*: GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace lb::cpu {

void int8_gemm_s32_portable(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            const int8_t* A, int64_t lda, const int8_t* B, int64_t ldb,
                            int32_t* C, int64_t ldc, bool accumulate) {
#pragma omp parallel for if (M * N * K > (1 << 20)) schedule(static)
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = accumulate ? C[m * ldc + n] : 0;
      for (int64_t k = 0; k < K; ++k) {
        const int32_t a = trans_a ? A[k * lda + m] : A[m * lda + k];
        const int32_t b = trans_b ? B[n * ldb + k] : B[k * ldb + n];
        // Unsigned arithmetic wraps like the hardware does (signed overflow would be UB).
        acc = static_cast<int32_t>(static_cast<uint32_t>(acc) + static_cast<uint32_t>(a * b));
      }
      C[m * ldc + n] = acc;
    }
  }
}

#if LB_INT8_GEMM_VNNI
LB_ISA_BEGIN_AVX512_VNNI
namespace {

constexpr int kMR = 6;          // rows of the register tile
constexpr int kNV = 4;          // zmm vectors per row of the tile
constexpr int kNR = 16 * kNV;   // columns of the register tile (a B panel)
constexpr int64_t kKC = 4096;   // contraction block (multiple of 4)
constexpr int64_t kMC = 96;     // rows of an A block (multiple of kMR and of 16)
constexpr int64_t kBPackBudget = int64_t{16} << 20;  // bytes of packed B held at once
static_assert(kMC % kMR == 0 && kMC % 16 == 0);

// Where the finished tile goes (the AMX kernel takes the same description).
using Epilogue = AmxInt8Output;

// B block [k0, k0 + kc) packed (see the file comment). comp[n] = -128·Σ_k b[k, n].
// Panel p of the B block [k0, k0 + kc).
void pack_b_panel(bool trans_b, const int8_t* B, int64_t ldb, int64_t N, int64_t k0, int64_t kc,
                  int8_t* dst, int32_t* comp, int64_t p) {
  const int64_t kq = (kc + 3) / 4;
  const int64_t kend = k0 + kc;
  {
    int8_t* d = dst + p * kq * kNR * 4;
    const int64_t n0 = p * kNR;
    for (int64_t q = 0; q < kq; ++q) {
      const int64_t k = k0 + 4 * q;
      for (int v = 0; v < kNV; ++v) {
        int8_t* dv = d + (q * kNR + 16 * v) * 4;
        const int64_t nn = n0 + 16 * v;
        if (!trans_b && k + 4 <= kend && nn + 16 <= N) {
          cpu::rows16_to_quads(B + k * ldb + nn, ldb, dv);
        } else if (trans_b && k + 4 <= kend && nn + 16 <= N) {
          for (int c = 0; c < 16; ++c) std::memcpy(dv + 4 * c, B + (nn + c) * ldb + k, 4);
        } else {
          cpu::edge_to_quads(trans_b, B, ldb, N, k, kend, nn, 16, dv);
        }
      }
    }
    // Column sums through the same instruction: Σ_j 1·b over each quad.
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i s[kNV];
    for (int v = 0; v < kNV; ++v) s[v] = _mm512_setzero_si512();
    for (int64_t q = 0; q < kq; ++q)
      for (int v = 0; v < kNV; ++v)
        s[v] = _mm512_dpbusd_epi32(s[v], ones, _mm512_loadu_si512(d + (q * kNR + 16 * v) * 4));
    for (int v = 0; v < kNV; ++v)
      _mm512_storeu_si512(comp + n0 + 16 * v, _mm512_mullo_epi32(s[v], _mm512_set1_epi32(-128)));
  }
}

// A rows [m0, m0 + mc), k in [k0, k0 + kc), packed into micro-panels (u8 = a + 128).
void pack_a(bool trans_a, const int8_t* A, int64_t lda, int64_t M, int64_t m0, int64_t mc,
            int64_t k0, int64_t kc, uint8_t* dst) {
  const int64_t kq = (kc + 3) / 4, kfull = kc / 4;
  const int64_t panels = (mc + kMR - 1) / kMR;
  // Whole 16-row groups of a (K, M) source take the vector path below.
  const bool fast_t = trans_a && mc % 16 == 0 && m0 + mc <= M;
  for (int64_t i = 0; i < panels; ++i) {
    uint8_t* d = dst + i * kq * kMR * 4;
    for (int r = 0; r < kMR; ++r) {
      const int64_t m = m0 + i * kMR + r;
      if (m >= M || m >= m0 + mc) {
        for (int64_t q = 0; q < kq; ++q) std::memset(d + (q * kMR + r) * 4, 0x80, 4);
        continue;
      }
      if (!trans_a) {
        const int8_t* src = A + m * lda + k0;
        for (int64_t q = 0; q < kfull; ++q) {
          uint32_t v;
          std::memcpy(&v, src + 4 * q, 4);
          v ^= 0x80808080u;
          std::memcpy(d + (q * kMR + r) * 4, &v, 4);
        }
        if (kq > kfull) {
          uint8_t* o = d + (kfull * kMR + r) * 4;
          for (int j = 0; j < 4; ++j)
            o[j] = 4 * kfull + j < kc ? static_cast<uint8_t>(src[4 * kfull + j]) ^ 0x80 : 0x80;
        }
      } else if (!fast_t) {
        for (int64_t q = 0; q < kq; ++q)
          for (int j = 0; j < 4; ++j) {
            const int64_t kk = 4 * q + j;
            d[(q * kMR + r) * 4 + j] =
                kk < kc ? static_cast<uint8_t>(A[(k0 + kk) * lda + m]) ^ 0x80 : 0x80;
          }
      }
    }
  }
  if (!fast_t) return;
  // A stored (K, M): 4 source rows of 16 bytes -> 16 row quads (as in pack_b), each then
  // stored to its micro-panel slot.
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  for (int64_t c0 = 0; c0 < mc; c0 += 16) {
    for (int64_t q = 0; q < kfull; ++q) {
      const int8_t* src = A + (k0 + 4 * q) * lda + m0 + c0;
      const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + lda));
      const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * lda));
      const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 3 * lda));
      const __m128i t0 = _mm_unpacklo_epi8(r0, r1), t1 = _mm_unpackhi_epi8(r0, r1);
      const __m128i t2 = _mm_unpacklo_epi8(r2, r3), t3 = _mm_unpackhi_epi8(r2, r3);
      alignas(16) uint32_t quad[16];
      __m128i* o = reinterpret_cast<__m128i*>(quad);
      _mm_store_si128(o + 0, _mm_xor_si128(_mm_unpacklo_epi16(t0, t2), flip));
      _mm_store_si128(o + 1, _mm_xor_si128(_mm_unpackhi_epi16(t0, t2), flip));
      _mm_store_si128(o + 2, _mm_xor_si128(_mm_unpacklo_epi16(t1, t3), flip));
      _mm_store_si128(o + 3, _mm_xor_si128(_mm_unpackhi_epi16(t1, t3), flip));
      for (int c = 0; c < 16; ++c) {
        const int64_t rr = c0 + c;
        std::memcpy(dst + (rr / kMR) * kq * kMR * 4 + (q * kMR + rr % kMR) * 4, &quad[c], 4);
      }
    }
    if (kq > kfull)  // the last partial quad
      for (int64_t rr = c0; rr < c0 + 16; ++rr)
        for (int j = 0; j < 4; ++j) {
          const int64_t kk = 4 * kfull + j;
          dst[(rr / kMR) * kq * kMR * 4 + (kfull * kMR + rr % kMR) * 4 + j] =
              kk < kc ? static_cast<uint8_t>(A[(k0 + kk) * lda + m0 + rr]) ^ 0x80 : 0x80;
        }
  }
}

// One 6 x 64 tile over kq quads. start: the partial tile to continue from (null: begin at
// comp). Finished tiles go to `ep` (rows mv ≤ 6, columns nv ≤ 64 valid) when `last`, else
// back to `part` (ld kNR-strided rows of the per-thread partial buffer).
inline void micro_kernel(int64_t kq, const uint8_t* a, const int8_t* b, const int32_t* comp,
                         int32_t* part, int64_t ld_part, bool first, bool last, const Epilogue& ep,
                         int64_t m, int64_t n, int mv, int nv) {
  // 24 named accumulators: GCC spills an indexed __m512i array to the stack.
#define LB_INIT(r)                                                                             \
  __m512i c##r##0 = _mm512_loadu_si512(comp), c##r##1 = _mm512_loadu_si512(comp + 16),         \
          c##r##2 = _mm512_loadu_si512(comp + 32), c##r##3 = _mm512_loadu_si512(comp + 48);    \
  if (!first) {                                                                                \
    const int32_t* pr = part + (r) * ld_part;                                                  \
    c##r##0 = _mm512_add_epi32(c##r##0, _mm512_loadu_si512(pr));                               \
    c##r##1 = _mm512_add_epi32(c##r##1, _mm512_loadu_si512(pr + 16));                          \
    c##r##2 = _mm512_add_epi32(c##r##2, _mm512_loadu_si512(pr + 32));                          \
    c##r##3 = _mm512_add_epi32(c##r##3, _mm512_loadu_si512(pr + 48));                          \
  }
  LB_INIT(0) LB_INIT(1) LB_INIT(2) LB_INIT(3) LB_INIT(4) LB_INIT(5)
#undef LB_INIT
#define LB_ROW(r)                                                                              \
  {                                                                                            \
    int32_t w;                                                                                 \
    std::memcpy(&w, a + 4 * (r), 4);                                                           \
    const __m512i av = _mm512_set1_epi32(w);                                                   \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, av, b0);                                            \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, av, b1);                                            \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, av, b2);                                            \
    c##r##3 = _mm512_dpbusd_epi32(c##r##3, av, b3);                                            \
  }
  for (int64_t q = 0; q < kq; ++q) {
    const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64),
                  b2 = _mm512_loadu_si512(b + 128), b3 = _mm512_loadu_si512(b + 192);
    LB_ROW(0) LB_ROW(1) LB_ROW(2) LB_ROW(3) LB_ROW(4) LB_ROW(5)
    a += 4 * kMR;
    b += 4 * kNR;
  }
#undef LB_ROW
  __m512i acc[kMR][kNV] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}, {c20, c21, c22, c23},
                           {c30, c31, c32, c33}, {c40, c41, c42, c43}, {c50, c51, c52, c53}};
  if (!last) {
    for (int r = 0; r < kMR; ++r)
      for (int v = 0; v < kNV; ++v) _mm512_storeu_si512(part + r * ld_part + 16 * v, acc[r][v]);
    return;
  }
  for (int r = 0; r < mv; ++r) {
    const int64_t row = m + r;
    for (int v = 0; v < kNV; ++v) {
      const int cols = std::min(16, nv - 16 * v);
      if (cols <= 0) break;
      const __mmask16 mask = cols == 16 ? __mmask16(0xFFFF) : __mmask16((1u << cols) - 1);
      const int64_t col = n + 16 * v;
      if (ep.to_f32) {
        const float s = (ep.row_scale ? ep.row_scale[row] : 1.f) * ep.alpha;
        float* o = ep.out + row * ep.ld + col;
        __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(acc[r][v]), _mm512_set1_ps(s));
        if (ep.col_scale) y = _mm512_mul_ps(y, _mm512_maskz_loadu_ps(mask, ep.col_scale + col));
        if (ep.accumulate) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mask, o));
        _mm512_mask_storeu_ps(o, mask, y);
      } else {
        int32_t* o = ep.c + row * ep.ld + col;
        __m512i y = acc[r][v];
        if (ep.accumulate) y = _mm512_add_epi32(y, _mm512_maskz_loadu_epi32(mask, o));
        _mm512_mask_storeu_epi32(o, mask, y);
      }
    }
  }
}

void gemm_vnni(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
               int64_t lda, const int8_t* B, int64_t ldb, const Epilogue& ep) {
  const int64_t panels = (N + kNR - 1) / kNR, Np = panels * kNR;
  const int64_t kblocks = std::max<int64_t>(1, (K + kKC - 1) / kKC);
  const int64_t kc_max = std::min(K, kKC), kq_max = (kc_max + 3) / 4;
  // Contraction blocks are packed a group at a time (as many as fit kBPackBudget): within a
  // group no barrier separates blocks, so a task runs all of them for its rows.
  const int64_t block_bytes = panels * kq_max * kNR * 4;
  const int64_t group = std::clamp<int64_t>(kBPackBudget / std::max<int64_t>(1, block_bytes), 1, kblocks);
  Tensor bpack = Tensor::empty({group * block_bytes}, DType::I8, Device::cpu(), MemTag::Workspace);
  Tensor comp = Tensor::empty({group * Np}, DType::I32, Device::cpu(), MemTag::Workspace);
  const int64_t mblocks = (M + kMC - 1) / kMC;
  const int threads = omp_get_max_threads();
  // Split columns too when there are few row blocks, so every thread has work.
  const int64_t nchunks = std::min(panels, std::max<int64_t>(1, (2 * threads + mblocks - 1) / mblocks));
  const int64_t chunk_panels = (panels + nchunks - 1) / nchunks;
  const int64_t tasks = mblocks * nchunks;
  const int64_t a_bytes = ((kMC + kMR - 1) / kMR) * kq_max * kMR * 4;
  Tensor apack = Tensor::empty({threads * a_bytes}, DType::U8, Device::cpu(), MemTag::Workspace);
  Tensor part;  // int32 partial tiles kept across contraction blocks (rows padded to kMR)
  if (kblocks > 1) part = Tensor::empty({(M + kMR) * Np}, DType::I32, Device::cpu(), MemTag::Workspace);
  // Slot (block j of the group, panel p) holds packed data of group round r when
  // ready[j·panels + p] == r. Packing and computing share one parallel region without a
  // barrier between them: with more runnable threads than cores, a barrier makes the running
  // thread spin while a preempted one holds the rest.
  std::vector<std::atomic<int64_t>> ready(static_cast<size_t>(group * panels));
  for (auto& r : ready) r.store(0, std::memory_order_relaxed);
  const bool parallel = M * N * K > (int64_t{1} << 25);  // ~0.1 ms of work

#pragma omp parallel if (parallel)
  for (int64_t g0 = 0; g0 < kblocks; g0 += group) {
    const int64_t g1 = std::min(kblocks, g0 + group), round = g0 / group + 1;
#pragma omp for schedule(dynamic, 1) nowait
    for (int64_t u = 0; u < (g1 - g0) * panels; ++u) {  // block-major: early blocks first
      const int64_t j = u / panels, p = u % panels, k0 = (g0 + j) * kKC;
      pack_b_panel(trans_b, B, ldb, N, k0, std::min(kKC, K - k0), bpack.data<int8_t>() + j * block_bytes,
                   comp.data<int32_t>() + j * Np, p);
      ready[static_cast<size_t>(u)].store(round, std::memory_order_release);
    }
    // Every slot is claimed once a thread gets here, so waiting for one cannot deadlock.
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t mb = t / nchunks, nc = t % nchunks;
      const int64_t m0 = mb * kMC, mc = std::min(kMC, M - m0);
      const int64_t p0 = nc * chunk_panels, p1 = std::min(panels, p0 + chunk_panels);
      uint8_t* ap = apack.data<uint8_t>() + omp_get_thread_num() * a_bytes;
      for (int64_t kb = g0; kb < g1; ++kb) {
        const int64_t j = kb - g0, k0 = kb * kKC, kc = std::min(kKC, K - k0), kq = (kc + 3) / 4;
        const bool first = kb == 0, last = kb + 1 == kblocks;
        pack_a(trans_a, A, lda, M, m0, mc, k0, kc, ap);
        for (int64_t p = p0; p < p1; ++p) {
          while (ready[static_cast<size_t>(j * panels + p)].load(std::memory_order_acquire) != round) _mm_pause();
          const int8_t* bp = bpack.data<int8_t>() + j * block_bytes + p * kq * kNR * 4;
          const int32_t* cp = comp.data<int32_t>() + j * Np + p * kNR;
          const int nv = static_cast<int>(std::min<int64_t>(kNR, N - p * kNR));
          for (int64_t i = 0; i * kMR < mc; ++i) {
            const int64_t m = m0 + i * kMR;
            const int mv = static_cast<int>(std::min<int64_t>(kMR, M - m));
            int32_t* pt = kblocks > 1 ? part.data<int32_t>() + m * Np + p * kNR : nullptr;
            micro_kernel(kq, ap + i * kq * kMR * 4, bp, cp, pt, Np, first, last, ep, m, p * kNR, mv, nv);
          }
        }
      }
    }  // implicit barrier: the next group reuses the slots
  }
}

}  // namespace
LB_ISA_END
#endif  // LB_INT8_GEMM_VNNI

namespace {
bool vnni_enabled() {
#if LB_INT8_GEMM_VNNI
  return isa_enabled(Isa::Avx512Vnni);
#else
  return false;
#endif
}
bool avx2_enabled() {
#if LB_INT8_GEMM_AVX2
  return isa_enabled(Isa::Avx2);
#else
  return false;
#endif
}
}  // namespace

const char* int8_gemm_kernel() {
  return amx_int8_available() ? "amx-int8" : vnni_enabled() ? "avx512-vnni" : avx2_enabled() ? "avx2" : "portable";
}

namespace {
// The tile or vector kernel for `o`, where the CPU has one; false: the caller runs the loop.
bool int8_gemm_vector(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                      const int8_t* B, int64_t ldb, const AmxInt8Output& o) {
  if (amx_int8_available()) {
    amx_int8_gemm(AmxRun::Hardware, trans_a, trans_b, M, N, K, A, lda, B, ldb, o);
    return true;
  }
#if LB_INT8_GEMM_VNNI
  if (vnni_enabled()) {
    gemm_vnni(trans_a, trans_b, M, N, K, A, lda, B, ldb, o);
    return true;
  }
#endif
#if LB_INT8_GEMM_AVX2
  if (avx2_enabled()) {
    int8_gemm_avx2(trans_a, trans_b, M, N, K, A, lda, B, ldb, o);
    return true;
  }
#endif
  return false;
}
}  // namespace

void int8_gemm_s32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, int32_t* C, int64_t ldc,
                   bool accumulate) {
  LB_CHECK(M >= 0 && N >= 0 && K >= 0, "int8_gemm: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  AmxInt8Output ep;
  ep.c = C;
  ep.ld = ldc;
  ep.accumulate = accumulate;
  if (int8_gemm_vector(trans_a, trans_b, M, N, K, A, lda, B, ldb, ep)) return;
  int8_gemm_s32_portable(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void int8_gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                   int64_t lda, const int8_t* B, int64_t ldb, float* out, int64_t ldo,
                   const float* row_scale, float alpha, bool accumulate, const float* col_scale) {
  LB_CHECK(M >= 0 && N >= 0 && K >= 0, "int8_gemm: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  AmxInt8Output ep;
  ep.to_f32 = true;
  ep.out = out;
  ep.ld = ldo;
  ep.row_scale = row_scale;
  ep.col_scale = col_scale;
  ep.alpha = alpha;
  ep.accumulate = accumulate;
  if (int8_gemm_vector(trans_a, trans_b, M, N, K, A, lda, B, ldb, ep)) return;
  std::vector<int32_t> c(static_cast<size_t>(M * N));
  int8_gemm_s32_portable(trans_a, trans_b, M, N, K, A, lda, B, ldb, c.data(), N, false);
  for (int64_t m = 0; m < M; ++m) {
    const float s = (row_scale ? row_scale[m] : 1.f) * alpha;
    for (int64_t n = 0; n < N; ++n) {
      float y = static_cast<float>(c[m * N + n]) * s;
      if (col_scale) y *= col_scale[n];
      out[m * ldo + n] = accumulate ? out[m * ldo + n] + y : y;
    }
  }
}

}  // namespace lb::cpu

// ---------------------------------------------------------------- the CPU table (src/backend/int8_gemm.h)

namespace lb::backend {
namespace {
void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const Tensor& A, int64_t a_offset,
              int64_t lda, const Tensor& B, int64_t b_offset, int64_t ldb, Tensor& out, int64_t ldo,
              const Tensor& row_scale, float alpha, bool accumulate) {
  cpu::int8_gemm_f32(trans_a, trans_b, M, N, K, A.data<int8_t>() + a_offset, lda, B.data<int8_t>() + b_offset, ldb,
                     out.data<float>(), ldo, data_or_null<float>(row_scale), alpha, accumulate);
}
}  // namespace

const Int8GemmKernels kCpuInt8Gemm{gemm_f32, cpu::int8_gemm_kernel};
const Int8GemmHostKernels kCpuInt8GemmHost{cpu::int8_gemm_f32, cpu::int8_gemm_emulated_f64};

}  // namespace lb::backend
