// Winograd F(2×2, 3×3) convolution (Lavin & Gray 2016, "Fast Algorithms for Convolutional
// Neural Networks", §4), forward and backward, for conv2d's 3×3 stride-1 convolutions.
//
// With Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1], G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1] and
// Aᵀ = [1 1 1 0; 0 1 −1 −1], one 2×2 output tile y_t from its 4×4 input tile d_t (input tiles
// step by 2 and overlap by 2; reads outside the image are the zero padding) is
//   y_t = Aᵀ [Σ_ci U_ci ⊙ V_ci,t] A,   U = G w Gᵀ (per co, ci),   V = Bᵀ d B (per ci, t).
// Indexing the 16 positions of a 4×4 tile by ξ, the sum is 16 GEMMs M[ξ] (Co, T) =
// U[ξ] (Co, C) · V[ξ] (C, T) over the T tiles of a chunk: 16 multiplications per 4 outputs
// instead of 36.
//
// Backward is the transpose of the same bilinear map. With Ĝ_t = A dy_t Aᵀ (4×4 from the 2×2
// output-gradient tile; outputs past the image edge count as zero):
//   data:   dd_t = B [Σ_co U_co,ci ⊙ Ĝ_co,t] Bᵀ, i.e. Z[ξ] (C, T) = U[ξ]ᵀ · Ĝ[ξ], then the
//           overlapping 4×4 tiles dd_t are scatter-added into dx (the padding border dropped);
//   filter: dw = Gᵀ [Σ_t Ĝ_t ⊙ V_t] G, i.e. dU[ξ] (Co, C) += Ĝ[ξ] · V[ξ]ᵀ over all tiles,
//           then the 4×4 → 3×3 transform per (co, ci).
// (<Ĝ, X> = <dy, Aᵀ X A> etc.: each line is the adjoint of a forward factor.) Ĝ is shared by
// both parts; V is rebuilt from x (it is 4× the size of x, so never saved).
//
// Chunks: the tiles of a chunk are whole tile rows (2 output rows × the image width), counted
// over (image, tile row), so a chunk may hold many small images (keeps the GEMMs wide on the
// 4×4 ResNet stage) or a slice of one large image; the transformed buffers, 16·(C + Co)·T
// values, stay about kChunkBytes (L2/L3-resident between the transforms and the GEMMs).
// Threads as in conv2d: chunks handed out dynamically over OpenMP threads, each running
// single-threaded GEMMs (cpu::gemm_serial) on its own scratch, the filter gradient summed
// per thread. Two chunks that split one image write overlapping dx rows (tiles overlap), so
// then even and odd chunks run in two rounds.
//
// Two layouts of a chunk's tiles (the transforms must vectorise; the GEMMs do not care):
//  - Rows (wide images): V (16, C, T), M and Ĝ (16, Co, T); tile t of a chunk is (tile row −
//    first row)·TW + tile column. The transforms run along tile rows (unit stride in V/M/Ĝ,
//    even/odd deinterleaved image rows).
//  - Channels (images up to 32 wide, whole images per chunk): the images are transposed to
//    zero-padded NHWC and the transforms run along the channels of one tile; V (16, T, C),
//    M and Ĝ (16, T, Co). Rows of TW ≤ 16 tiles are short vectors (TW = 2 on a 4×4 image);
//    channels are 64..512 long and contiguous.
// U and dU are (16, Co, C) in both.
//
// Measured (2 cores, AVX-512 sgemm behind gemm_serial, batch 64, median fwd / bwd ms, quiet
// spells on a shared machine), im2col -> Winograd: 64ch 32×32 13.7/27.2 -> 8.5/17.0,
// 128ch 16×16 12.4/23.6 -> 7.3/14.2, 256ch 8×8 13.3/27.2 -> 6.4/13.1, 512ch 4×4
// 13.8/28.3 -> 6.8/14.1; `leanback bench conv_bwd` (64ch 32×32, bias) 43.0 / 42.8 ->
// 25.0 / 27.5 ms per step; `leanback bench resnet18` 698 / 708 -> 446 / 417 ms per step
// (LEANBACK_CONV_ALGO=im2col for the first figures). What is left besides the GEMMs, one
// thread, 64ch 32×32 backward: the transforms and NHWC packing ~1/3 (each tile transform
// writes 16 values per 4 input or output values), the GEMMs ~2/3.
#include "src/cpu/winograd_conv.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lb/core/error.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/im2col.h"

namespace lb::detail {

namespace {

constexpr int64_t kXi = 16;  // positions of a 4×4 tile
// Transformed buffers per chunk (V and M, or Ĝ and V), in bytes. Measured per ResNet stage
// at 1..16 MiB: 8 best overall (the 4×4 stage wants wide chunks, the GEMMs pack U[ξ] once per
// chunk; 16 MiB fell out of cache on the 32×32 stage).
constexpr int64_t kChunkBytes = 8 << 20;
// Below this many (direct-convolution) FLOPs the work stays on the calling thread.
constexpr int64_t kParallelFlops = 1 << 22;
// Auto: Winograd only where it was measured faster than im2col (one thread, fwd + bwd CPU
// ms, im2col vs Winograd, 32×32 images): the input channels are the GEMMs' depth and the
// channel layout's vector length, so few of them lose (8 -> 8 3.5 vs 5.0, 8 -> 64 11.3 vs
// 17.2, 12 -> 12 6.7 vs 16.1; 16 -> 16, 16 -> 32 and 16 -> 64 about even; 24 -> 24 16.4 vs
// 15.3; 32 -> 16 17.4 vs 12.7, 32 -> 32 24.8 vs 17.5, 64 -> 16 33.7 vs 22.6, 64 -> 8 27.6
// vs 20.0), hence C ≥ 32 with Co ≥ 16, or C ≥ 64 with Co ≥ 8. And the tiles must not be
// mostly past the edge: 16 products per 2×2 tile against 9 per output, Winograd when
// 2·tiles ≤ Ho·Wo (256ch: 3×3 outputs 13.9 vs 10.7, 2×2 6.9 vs 3.9, but 1×1 3.1 vs 3.8,
// and 512ch 1×1 8.8 vs 14.0).
constexpr int64_t kMinInChannels = 32, kMinOutChannels = 16;
constexpr int64_t kMinInChannelsNarrowOut = 64, kMinOutChannelsNarrow = 8;

// Auto: the channel layout for images at most this many tiles wide and whose transformed
// buffers fit in 2 chunks (one thread, fwd + bwd ms, rows -> channels: 64ch 32x32 51 -> 48,
// 128ch 16x16 45 -> 41, 256ch 8x8 60 -> 39, 512ch 4x4 59 -> 46; but 64ch 64x64 47 -> 48 and
// 112x112 37 -> 47).
constexpr int64_t kChannelsMaxTW = 16;

std::atomic<int> g_algo{-1};
std::atomic<int> g_layout{static_cast<int>(WinogradLayout::Auto)};

ConvAlgo algo_from_env() {
  const char* env = std::getenv("LEANBACK_CONV_ALGO");
  if (!env || !*env) return ConvAlgo::Auto;
  const std::string v(env);
  if (v == "auto") return ConvAlgo::Auto;
  if (v == "im2col") return ConvAlgo::Im2col;
  if (v == "winograd") return ConvAlgo::Winograd;
  LB_FAIL("LEANBACK_CONV_ALGO=", v, " is not one of auto, im2col, winograd");
}

template <typename T>
Tensor workspace(int64_t n) {
  return Tensor::empty({std::max<int64_t>(n, 1)}, DTypeOf<T>::value, Device::cpu(),
                       MemTag::Workspace);
}

struct Plan {
  WinogradShape s;
  int64_t TH, TW;  // tile rows per image, tiles per tile row
  int64_t rows;    // N·TH tile rows in all
  int64_t rpc;     // tile rows per chunk
  int64_t nc;      // chunks
  int64_t tmax;    // tiles of the largest chunk, rpc·TW
  int threads;
  bool nhwc;  // channel layout (whole images per chunk), else row layout
};

Plan make_plan(const WinogradShape& s, int64_t elem) {
  Plan p{};
  p.s = s;
  p.TH = (s.Ho + 1) / 2;
  p.TW = (s.Wo + 1) / 2;
  p.rows = s.N * p.TH;
  const int64_t row_bytes = kXi * (s.C + s.Co) * p.TW * elem;
  p.rpc = std::clamp<int64_t>(kChunkBytes / row_bytes, 1, p.rows);
  const WinogradLayout layout = winograd_layout();
  p.nhwc = layout == WinogradLayout::Channels ||
           (layout == WinogradLayout::Auto && p.TW <= kChannelsMaxTW &&
            p.TH * row_bytes <= 2 * kChunkBytes);
  const int64_t nt = omp_get_max_threads();
  const bool par = nt > 1 && p.rows > 1 && 18 * s.N * s.Co * s.C * s.Ho * s.Wo > kParallelFlops;
  if (par) p.rpc = std::min(p.rpc, (p.rows + nt - 1) / nt);
  if (p.nhwc)
    p.rpc = std::max(p.TH, p.rpc - p.rpc % p.TH);  // whole images only
  else if (p.rpc > p.TH)
    p.rpc -= p.rpc % p.TH;  // whole images when more than one fits
  p.nc = (p.rows + p.rpc - 1) / p.rpc;
  p.threads = par ? static_cast<int>(std::min<int64_t>(nt, p.nc)) : 1;
  p.tmax = p.rpc * p.TW;
  return p;
}

// Per-thread line buffers for the transforms: one padded image row (2·TW + 4) and kLines
// lines of TW + 1 values (row stride ld) along a tile row.
constexpr int kLines = 36;
template <typename T>
struct Lines {
  T* pad;
  T* v;  // line i at v + i·ld
  int64_t ld;
  T* line(int i) const { return v + i * ld; }
};

// Calls f(n, tha, thb, t0) for each run of tile rows [tha, thb) of image n within the chunk's
// rows [r0, r1); t0 is the run's first tile within the chunk.
template <typename F>
void for_each_run(const Plan& p, int64_t r0, int64_t r1, F&& f) {
  for (int64_t r = r0; r < r1;) {
    const int64_t n = r / p.TH, tha = r % p.TH, thb = std::min(p.TH, tha + (r1 - r));
    f(n, tha, thb, (r - r0) * p.TW);
    r += thb - tha;
  }
}

// U[ξ] (Co, C) = (G w Gᵀ)[ξ] for every (co, ci); 16 filters at a time, transposed to
// (9, 16) so that each of the 16 outputs is one vector. Work-shared (omp for) when called
// inside a parallel region.
template <typename T>
void transform_weights(const WinogradShape& s, const T* w, T* U) {
  const int64_t CC = s.Co * s.C;
  constexpr int kB = 16;
#pragma omp for schedule(static)
  for (int64_t k0 = 0; k0 < CC; k0 += kB) {
    const int nb = static_cast<int>(std::min<int64_t>(kB, CC - k0));
    T g[9][kB];
    if (nb == kB) {
      for (int k = 0; k < kB; ++k)
        for (int e = 0; e < 9; ++e) g[e][k] = w[(k0 + k) * 9 + e];
    } else {
      for (int k = 0; k < kB; ++k)
        for (int e = 0; e < 9; ++e) g[e][k] = k < nb ? w[(k0 + k) * 9 + e] : T(0);
    }
    T u[16][kB];
#pragma omp simd
    for (int k = 0; k < kB; ++k) {
      T t[4][3];  // G w
      for (int c = 0; c < 3; ++c) {
        t[0][c] = g[c][k];
        t[1][c] = T(0.5) * (g[c][k] + g[3 + c][k] + g[6 + c][k]);
        t[2][c] = T(0.5) * (g[c][k] - g[3 + c][k] + g[6 + c][k]);
        t[3][c] = g[6 + c][k];
      }
      for (int i = 0; i < 4; ++i) {
        u[4 * i][k] = t[i][0];
        u[4 * i + 1][k] = T(0.5) * (t[i][0] + t[i][1] + t[i][2]);
        u[4 * i + 2][k] = T(0.5) * (t[i][0] - t[i][1] + t[i][2]);
        u[4 * i + 3][k] = t[i][2];
      }
    }
    if (nb == kB) {
      for (int q = 0; q < 16; ++q)
        for (int k = 0; k < kB; ++k) U[q * CC + k0 + k] = u[q][k];
    } else {
      for (int q = 0; q < 16; ++q)
        for (int k = 0; k < nb; ++k) U[q * CC + k0 + k] = u[q][k];
    }
  }
}

// dw (Co, C, 3, 3) = Gᵀ dU G for every (co, ci), dU the sum of `parts` partial sums
// (16, Co, C) spaced `stride` apart. Blocked and work-shared like transform_weights.
template <typename T>
void inverse_weights(const WinogradShape& s, const T* dU, int parts, int64_t stride, T* dw) {
  const int64_t CC = s.Co * s.C;
  constexpr int kB = 16;
#pragma omp for schedule(static)
  for (int64_t k0 = 0; k0 < CC; k0 += kB) {
    const int nb = static_cast<int>(std::min<int64_t>(kB, CC - k0));
    T x[16][kB] = {};
    for (int t = 0; t < parts; ++t)
      for (int q = 0; q < 16; ++q) {
        const T* src = dU + t * stride + q * CC + k0;
        if (nb == kB) {
          for (int k = 0; k < kB; ++k) x[q][k] += src[k];
        } else {
          for (int k = 0; k < nb; ++k) x[q][k] += src[k];
        }
      }
    T g[9][kB];
#pragma omp simd
    for (int k = 0; k < kB; ++k) {
      T r[3][4];  // Gᵀ X
      for (int j = 0; j < 4; ++j) {
        r[0][j] = x[j][k] + T(0.5) * (x[4 + j][k] + x[8 + j][k]);
        r[1][j] = T(0.5) * (x[4 + j][k] - x[8 + j][k]);
        r[2][j] = T(0.5) * (x[4 + j][k] + x[8 + j][k]) + x[12 + j][k];
      }
      for (int i = 0; i < 3; ++i) {
        g[3 * i][k] = r[i][0] + T(0.5) * (r[i][1] + r[i][2]);
        g[3 * i + 1][k] = T(0.5) * (r[i][1] - r[i][2]);
        g[3 * i + 2][k] = T(0.5) * (r[i][1] + r[i][2]) + r[i][3];
      }
    }
    for (int k = 0; k < nb; ++k)
      for (int e = 0; e < 9; ++e) dw[(k0 + k) * 9 + e] = g[e][k];
  }
}

// Row ih of a plane (H, W), zero-padded: pad[j] = x[ih, j − pw] for j in [0, 2·TW + 2),
// then d B along the row: with the tile's row d = (pad[2t], pad[2t+1], pad[2t+2],
// pad[2t+3]), h_j[t] = (d0 − d2, d1 + d2, d2 − d1, d1 − d3)_j.
template <typename T>
void row_transform(const T* plane, int64_t ih, const Plan& p, T* pad, T* __restrict h0,
                   T* __restrict h1, T* __restrict h2, T* __restrict h3) {
  const WinogradShape& s = p.s;
  const int64_t TW = p.TW;
  if (ih < 0 || ih >= s.H) {
    for (T* h : {h0, h1, h2, h3}) std::fill(h, h + TW, T(0));
    return;
  }
  // 2·TW ≥ Wo = W + 2·pw − 2, so the row always fits: [pw, pw + W) ⊂ [0, 2·TW + 2).
  std::fill(pad, pad + s.pw, T(0));
  std::memcpy(pad + s.pw, plane + ih * s.W, sizeof(T) * s.W);
  std::fill(pad + s.pw + s.W, pad + 2 * TW + 2, T(0));
  const T* __restrict d = pad;
#pragma omp simd
  for (int64_t t = 0; t < TW; ++t) {
    const T d0 = d[2 * t], d1 = d[2 * t + 1], d2 = d[2 * t + 2], d3 = d[2 * t + 3];
    h0[t] = d0 - d2;
    h1[t] = d1 + d2;
    h2[t] = d2 - d1;
    h3[t] = d1 - d3;
  }
}

// V[ξ] (C, T) of the tile rows [r0, r1): V_t = Bᵀ d_t B. Each input row is transformed
// along its width once (row_transform into a ring of 4 rows × 4 lines) and shared by the two
// tile rows it belongs to; Bᵀ then combines the 4 rows of a tile row.
template <typename T>
void transform_input(const Plan& p, const T* x, int64_t r0, int64_t r1, T* V, const Lines<T>& L) {
  const WinogradShape& s = p.s;
  const int64_t TW = p.TW, nT = (r1 - r0) * TW, CT = s.C * nT;
  for (int64_t ci = 0; ci < s.C; ++ci) {
    for_each_run(p, r0, r1, [&](int64_t n, int64_t tha, int64_t thb, int64_t t0) {
      const T* plane = x + (n * s.C + ci) * s.H * s.W;
      const int64_t ih0 = 2 * tha - s.ph;  // input row of relative row 0
      auto row = [&](int64_t i) {  // relative input row i -> ring slot i mod 4
        const int slot = static_cast<int>(i & 3);
        row_transform(plane, ih0 + i, p, L.pad, L.line(4 * slot), L.line(4 * slot + 1),
                      L.line(4 * slot + 2), L.line(4 * slot + 3));
      };
      row(0);
      row(1);
      for (int64_t th = tha; th < thb; ++th) {
        const int64_t i = 2 * (th - tha);
        row(i + 2);
        row(i + 3);
        T* dst = V + ci * nT + t0 + (th - tha) * TW;
        for (int j = 0; j < 4; ++j) {
          const T* __restrict a0 = L.line(4 * static_cast<int>(i & 3) + j);
          const T* __restrict a1 = L.line(4 * static_cast<int>((i + 1) & 3) + j);
          const T* __restrict a2 = L.line(4 * static_cast<int>((i + 2) & 3) + j);
          const T* __restrict a3 = L.line(4 * static_cast<int>((i + 3) & 3) + j);
          T* __restrict v0 = dst + j * CT;
          T* __restrict v1 = dst + (4 + j) * CT;
          T* __restrict v2 = dst + (8 + j) * CT;
          T* __restrict v3 = dst + (12 + j) * CT;
#pragma omp simd
          for (int64_t t = 0; t < TW; ++t) {
            v0[t] = a0[t] - a2[t];
            v1[t] = a1[t] + a2[t];
            v2[t] = a2[t] - a1[t];
            v3[t] = a1[t] - a3[t];
          }
        }
      }
    });
  }
}

// y of the tile rows [r0, r1) from M[ξ] (Co, T): y_t = Aᵀ M_t A (+ b).
template <typename T>
void transform_output(const Plan& p, const T* M, const T* b, int64_t r0, int64_t r1, T* y,
                      const Lines<T>& L) {
  const WinogradShape& s = p.s;
  const int64_t TW = p.TW, nT = (r1 - r0) * TW, CT = s.Co * nT;
  T* __restrict y0 = L.pad;      // output row 2·th, 2·TW values
  T* __restrict y1 = L.line(0);  // output row 2·th + 1 (lines 0 and 1)
  for (int64_t co = 0; co < s.Co; ++co) {
    const T bias = b ? b[co] : T(0);
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.TH, th = r % p.TH;
      const T* src = M + co * nT + (r - r0) * TW;
      const T* __restrict m[16];
      for (int q = 0; q < 16; ++q) m[q] = src + q * CT;
#pragma omp simd
      for (int64_t k = 0; k < TW; ++k) {
        // Rows: Aᵀ M = (M0 + M1 + M2, M1 − M2 − M3), per column j; then the same along j.
        T a[4], c[4];
        for (int j = 0; j < 4; ++j) {
          a[j] = m[j][k] + m[4 + j][k] + m[8 + j][k];
          c[j] = m[4 + j][k] - m[8 + j][k] - m[12 + j][k];
        }
        y0[2 * k] = a[0] + a[1] + a[2] + bias;
        y0[2 * k + 1] = a[1] - a[2] - a[3] + bias;
        y1[2 * k] = c[0] + c[1] + c[2] + bias;
        y1[2 * k + 1] = c[1] - c[2] - c[3] + bias;
      }
      T* plane = y + (n * s.Co + co) * s.Ho * s.Wo;
      std::memcpy(plane + 2 * th * s.Wo, y0, sizeof(T) * s.Wo);
      if (2 * th + 1 < s.Ho) std::memcpy(plane + (2 * th + 1) * s.Wo, y1, sizeof(T) * s.Wo);
    }
  }
}

// Ĝ[ξ] (Co, T) of the tile rows [r0, r1): Ĝ_t = A dy_t Aᵀ, outputs past the edge zero.
template <typename T>
void transform_grad(const Plan& p, const T* dy, int64_t r0, int64_t r1, T* Gh,
                    const Lines<T>& L) {
  const WinogradShape& s = p.s;
  const int64_t TW = p.TW, nT = (r1 - r0) * TW, CT = s.Co * nT;
  T* pad0 = L.pad;      // dy rows 2·th and 2·th + 1, zero-padded to 2·TW
  T* pad1 = L.line(0);  // (lines 0 and 1)
  for (int64_t co = 0; co < s.Co; ++co) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / p.TH, th = r % p.TH;
      const T* plane = dy + (n * s.Co + co) * s.Ho * s.Wo;
      pad0[2 * TW - 1] = T(0);  // past the edge when Wo is odd
      std::memcpy(pad0, plane + 2 * th * s.Wo, sizeof(T) * s.Wo);
      if (2 * th + 1 < s.Ho) {
        pad1[2 * TW - 1] = T(0);
        std::memcpy(pad1, plane + (2 * th + 1) * s.Wo, sizeof(T) * s.Wo);
      } else {
        std::fill(pad1, pad1 + 2 * TW, T(0));
      }
      const T* __restrict g0 = pad0;
      const T* __restrict g1 = pad1;
      T* dst = Gh + co * nT + (r - r0) * TW;
      T* __restrict o[16];
      for (int q = 0; q < 16; ++q) o[q] = dst + q * CT;
#pragma omp simd
      for (int64_t k = 0; k < TW; ++k) {
        // Columns: g Aᵀ = (g0, g0 + g1, g0 − g1, −g1) per row; then the same down the rows.
        const T g00 = g0[2 * k], g01 = g0[2 * k + 1], g10 = g1[2 * k], g11 = g1[2 * k + 1];
        const T q0[4] = {g00, g00 + g01, g00 - g01, -g01};
        const T q1[4] = {g10, g10 + g11, g10 - g11, -g11};
        for (int j = 0; j < 4; ++j) {
          o[j][k] = q0[j];
          o[4 + j][k] = q0[j] + q1[j];
          o[8 + j][k] = q0[j] - q1[j];
          o[12 + j][k] = -q1[j];
        }
      }
    }
  }
}

// Stores (or, with add, accumulates) one padded dx row (2·TW + 2 values, even columns in e,
// odd in o) into dx row ih of the plane, dropping the padding.
template <typename T>
void emit_row(const Plan& p, const T* __restrict e, const T* __restrict o, T* pad, T* plane,
              int64_t ih, bool add) {
  const WinogradShape& s = p.s;
  if (ih < 0 || ih >= s.H) return;
#pragma omp simd
  for (int64_t t = 0; t <= p.TW; ++t) {
    pad[2 * t] = e[t];
    pad[2 * t + 1] = o[t];
  }
  T* __restrict row = plane + ih * s.W;
  const T* __restrict src = pad + s.pw;
  if (add) {
#pragma omp simd
    for (int64_t iw = 0; iw < s.W; ++iw) row[iw] += src[iw];
  } else {
    std::memcpy(row, src, sizeof(T) * s.W);
  }
}

// dx of the tile rows [r0, r1) from Z[ξ] (C, T): the tiles dd_t = B Z_t Bᵀ overlap by 2
// rows and 2 columns; they are summed along a tile row in registers (even/odd columns) and
// down the rows through a carry of the previous tile row's last two rows, so each dx row is
// stored once per run. Rows a run shares with a neighbouring chunk (when a chunk boundary
// splits an image) are accumulated instead; the caller zeroes them first.
template <typename T>
void inverse_input(const Plan& p, const T* Z, int64_t r0, int64_t r1, T* dx, const Lines<T>& L) {
  const WinogradShape& s = p.s;
  const int64_t TW = p.TW, nT = (r1 - r0) * TW, CT = s.C * nT;
  // Lines: dd[k][l] 0..15; this tile row's padded rows k (even/odd) 16..23; carry 24..27.
  for (int64_t ci = 0; ci < s.C; ++ci) {
    for_each_run(p, r0, r1, [&](int64_t n, int64_t tha, int64_t thb, int64_t t0) {
      T* plane = dx + (n * s.C + ci) * s.H * s.W;
      T* ce[2] = {L.line(24), L.line(25)};  // carry: rows 2, 3 of the previous tile row
      T* co[2] = {L.line(26), L.line(27)};
      for (int64_t th = tha; th < thb; ++th) {
        const T* src = Z + ci * nT + t0 + (th - tha) * TW;
        const T* __restrict z[16];
        T* __restrict d[16];
        for (int q = 0; q < 16; ++q) {
          z[q] = src + q * CT;
          d[q] = L.line(q);
        }
#pragma omp simd
        for (int64_t t = 0; t < TW; ++t) {
          // Rows: B Z = (Z0, Z1 − Z2 + Z3, −Z0 + Z1 + Z2, −Z3), per column j; then columns.
          T w[4][4];
          for (int j = 0; j < 4; ++j) {
            const T a0 = z[j][t], a1 = z[4 + j][t], a2 = z[8 + j][t], a3 = z[12 + j][t];
            w[0][j] = a0;
            w[1][j] = a1 - a2 + a3;
            w[2][j] = -a0 + a1 + a2;
            w[3][j] = -a3;
          }
          for (int k = 0; k < 4; ++k) {
            d[4 * k][t] = w[k][0];
            d[4 * k + 1][t] = w[k][1] - w[k][2] + w[k][3];
            d[4 * k + 2][t] = -w[k][0] + w[k][1] + w[k][2];
            d[4 * k + 3][t] = -w[k][3];
          }
        }
        // Along the row: even padded column 2t gets dd[k][0][t] + dd[k][2][t − 1], odd
        // column 2t + 1 gets dd[k][1][t] + dd[k][3][t − 1], t in [0, TW].
        const bool first = th == tha;
        for (int k = 0; k < 4; ++k) {
          const T* __restrict d0 = d[4 * k];
          const T* __restrict d1 = d[4 * k + 1];
          const T* __restrict d2 = d[4 * k + 2];
          const T* __restrict d3 = d[4 * k + 3];
          T* __restrict e = k < 2 ? L.line(16 + 2 * k) : ce[k - 2];
          T* __restrict o = k < 2 ? L.line(17 + 2 * k) : co[k - 2];
          const T* __restrict cce = k < 2 ? ce[k] : nullptr;
          const T* __restrict cco = k < 2 ? co[k] : nullptr;
          if (k < 2 && !first) {
            // Rows 0, 1 of this tile row plus rows 2, 3 of the previous one.
            e[0] = d0[0] + cce[0];
            o[0] = d1[0] + cco[0];
#pragma omp simd
            for (int64_t t = 1; t < TW; ++t) {
              e[t] = d0[t] + d2[t - 1] + cce[t];
              o[t] = d1[t] + d3[t - 1] + cco[t];
            }
            e[TW] = d2[TW - 1] + cce[TW];
            o[TW] = d3[TW - 1] + cco[TW];
          } else {
            e[0] = d0[0];
            o[0] = d1[0];
#pragma omp simd
            for (int64_t t = 1; t < TW; ++t) {
              e[t] = d0[t] + d2[t - 1];
              o[t] = d1[t] + d3[t - 1];
            }
            e[TW] = d2[TW - 1];
            o[TW] = d3[TW - 1];
          }
          if (k == 1) {
            // Rows 0 and 1 are complete (the carry is consumed): store them. The first two
            // rows of a run that starts mid-image are shared with the previous chunk.
            const int64_t ih = 2 * th - s.ph;
            const bool add = first && tha > 0;
            emit_row(p, L.line(16), L.line(17), L.pad, plane, ih, add);
            emit_row(p, L.line(18), L.line(19), L.pad, plane, ih + 1, add);
          }
        }
      }
      // The last tile row's rows 2, 3, shared with the next chunk when the image goes on.
      const int64_t ih = 2 * thb - s.ph;
      emit_row(p, ce[0], co[0], L.pad, plane, ih, thb < p.TH);
      emit_row(p, ce[1], co[1], L.pad, plane, ih + 1, thb < p.TH);
    });
  }
}

// ---- Channel layout (small images): chunks of whole images, tiles vectorised over channels.
// Rows of TW ≤ kChannelsMaxTW tiles are too short to vectorise along, so for small images the
// chunk's images are first transposed to zero-padded NHWC (channels innermost, contiguous),
// every tile transform then runs along all C channels at once, and the transformed buffers
// are tile-major: V[ξ] (T, C), M[ξ] and Ĝ[ξ] (T, Co), so one tile's channels are one row.
// Tile t of a chunk is (image − first)·TH·TW + th·TW + tw. The GEMMs take the transposes:
//   M[ξ] = V[ξ] · U[ξ]ᵀ,  dU[ξ] += Ĝ[ξ]ᵀ · V[ξ],  Z[ξ] = Ĝ[ξ] · U[ξ].

// x images [n0, n0 + nb) -> Xp (nb, HP, WP, C), HP = 2·TH + 2, WP = 2·TW + 2, zero-padded.
template <typename T>
void pack_input_nhwc(const Plan& p, const T* x, int64_t n0, int64_t nb, T* Xp) {
  const WinogradShape& s = p.s;
  const int64_t HP = 2 * p.TH + 2, WP = 2 * p.TW + 2, C = s.C, HW = s.H * s.W;
  // Zero only the padding: rows above and below the image, columns left and right of it.
  for (int64_t nl = 0; nl < nb; ++nl) {
    T* img = Xp + nl * HP * WP * C;
    std::fill(img, img + s.ph * WP * C, T(0));
    std::fill(img + (s.ph + s.H) * WP * C, img + HP * WP * C, T(0));
    for (int64_t ih = 0; ih < s.H; ++ih) {
      T* row = img + (s.ph + ih) * WP * C;
      std::fill(row, row + s.pw * C, T(0));
      std::fill(row + (s.pw + s.W) * C, row + WP * C, T(0));
    }
  }
  constexpr int64_t kCB = 16;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t c0 = 0; c0 < C; c0 += kCB) {
      const int64_t cb = std::min(kCB, C - c0);
      const T* src = x + ((n0 + nl) * C + c0) * HW;
      for (int64_t ih = 0; ih < s.H; ++ih) {
        T* dst = Xp + ((nl * HP + ih + s.ph) * WP + s.pw) * C + c0;
        for (int64_t iw = 0; iw < s.W; ++iw)
          for (int64_t c = 0; c < cb; ++c) dst[iw * C + c] = src[c * HW + ih * s.W + iw];
      }
    }
}

// dy images [n0, n0 + nb) -> Gp (nb, 2·TH, 2·TW, Co), zero past the output edge.
template <typename T>
void pack_grad_nhwc(const Plan& p, const T* dy, int64_t n0, int64_t nb, T* Gp) {
  const WinogradShape& s = p.s;
  const int64_t HG = 2 * p.TH, WG = 2 * p.TW, Co = s.Co, P = s.Ho * s.Wo;
  if (HG != s.Ho || WG != s.Wo) std::fill(Gp, Gp + nb * HG * WG * Co, T(0));
  constexpr int64_t kCB = 16;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t c0 = 0; c0 < Co; c0 += kCB) {
      const int64_t cb = std::min(kCB, Co - c0);
      const T* src = dy + ((n0 + nl) * Co + c0) * P;
      for (int64_t oh = 0; oh < s.Ho; ++oh) {
        T* dst = Gp + (nl * HG + oh) * WG * Co + c0;
        for (int64_t ow = 0; ow < s.Wo; ++ow)
          for (int64_t c = 0; c < cb; ++c) dst[ow * Co + c] = src[c * P + oh * s.Wo + ow];
      }
    }
}

// V[ξ] (T, C) = Bᵀ d_t B from Xp, every channel at once.
template <typename T>
void transform_input_nhwc(const Plan& p, const T* Xp, int64_t nb, T* V) {
  const int64_t C = p.s.C, HP = 2 * p.TH + 2, WP = 2 * p.TW + 2, nT = nb * p.TH * p.TW;
  const int64_t stride = nT * C;  // between ξ
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t th = 0; th < p.TH; ++th)
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        const int64_t t = (nl * p.TH + th) * p.TW + tw;
        const T* base = Xp + ((nl * HP + 2 * th) * WP + 2 * tw) * C;
        const T* __restrict d[16];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[4 * i + j] = base + (i * WP + j) * C;
        T* __restrict v = V + t * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          T h[4][4];  // d B, row i
          for (int i = 0; i < 4; ++i) {
            const T d0 = d[4 * i][c], d1 = d[4 * i + 1][c], d2 = d[4 * i + 2][c],
                    d3 = d[4 * i + 3][c];
            h[i][0] = d0 - d2;
            h[i][1] = d1 + d2;
            h[i][2] = d2 - d1;
            h[i][3] = d1 - d3;
          }
          for (int j = 0; j < 4; ++j) {
            v[j * stride + c] = h[0][j] - h[2][j];
            v[(4 + j) * stride + c] = h[1][j] + h[2][j];
            v[(8 + j) * stride + c] = h[2][j] - h[1][j];
            v[(12 + j) * stride + c] = h[1][j] - h[3][j];
          }
        }
      }
}

// y images [n0, n0 + nb) from M[ξ] (T, Co): Aᵀ M_t A into Yp (nb, Ho, Wo, Co), then
// transposed into y with the bias.
template <typename T>
void transform_output_nhwc(const Plan& p, const T* M, const T* b, int64_t n0, int64_t nb, T* Yp,
                           T* sink, T* y) {
  const WinogradShape& s = p.s;
  const int64_t Co = s.Co, nT = nb * p.TH * p.TW, stride = nT * Co, P = s.Ho * s.Wo;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t th = 0; th < p.TH; ++th)
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        const int64_t t = (nl * p.TH + th) * p.TW + tw;
        const T* __restrict m = M + t * Co;
        const int64_t oh = 2 * th, ow = 2 * tw;
        T* y00 = Yp + ((nl * s.Ho + oh) * s.Wo + ow) * Co;
        const bool right = ow + 1 < s.Wo, down = oh + 1 < s.Ho;
        // Outputs past the edge go to the sink (Co values).
        T* y01 = right ? y00 + Co : sink;
        T* y10 = down ? y00 + s.Wo * Co : sink;
        T* y11 = right && down ? y00 + (s.Wo + 1) * Co : sink;
#pragma omp simd
        for (int64_t c = 0; c < Co; ++c) {
          T a[4], e[4];
          for (int j = 0; j < 4; ++j) {
            a[j] = m[j * stride + c] + m[(4 + j) * stride + c] + m[(8 + j) * stride + c];
            e[j] = m[(4 + j) * stride + c] - m[(8 + j) * stride + c] - m[(12 + j) * stride + c];
          }
          y00[c] = a[0] + a[1] + a[2];
          y01[c] = a[1] - a[2] - a[3];
          y10[c] = e[0] + e[1] + e[2];
          y11[c] = e[1] - e[2] - e[3];
        }
      }
  constexpr int64_t kCB = 16;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t c0 = 0; c0 < Co; c0 += kCB) {
      const int64_t cb = std::min(kCB, Co - c0);
      T* dst = y + ((n0 + nl) * Co + c0) * P;
      const T* src = Yp + nl * P * Co + c0;
      // Blocks of 64 positions, so that the cache lines of src stay in L1 across the cb rows.
      for (int64_t q0 = 0; q0 < P; q0 += 64) {
        const int64_t q1 = std::min(P, q0 + 64);
        for (int64_t c = 0; c < cb; ++c) {
          const T bias = b ? b[c0 + c] : T(0);
          for (int64_t q = q0; q < q1; ++q) dst[c * P + q] = src[q * Co + c] + bias;
        }
      }
    }
}

// Ĝ[ξ] (T, Co) = A g_t Aᵀ from Gp, every channel at once.
template <typename T>
void transform_grad_nhwc(const Plan& p, const T* Gp, int64_t nb, T* Gh) {
  const int64_t Co = p.s.Co, WG = 2 * p.TW, nT = nb * p.TH * p.TW, stride = nT * Co;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t th = 0; th < p.TH; ++th)
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        const int64_t t = (nl * p.TH + th) * p.TW + tw;
        const T* __restrict g00 = Gp + ((nl * 2 * p.TH + 2 * th) * WG + 2 * tw) * Co;
        const T* __restrict g01 = g00 + Co;
        const T* __restrict g10 = g00 + WG * Co;
        const T* __restrict g11 = g10 + Co;
        T* __restrict o = Gh + t * Co;
#pragma omp simd
        for (int64_t c = 0; c < Co; ++c) {
          // Columns: g Aᵀ = (g0, g0 + g1, g0 − g1, −g1) per row; then the same down the rows.
          const T q0[4] = {g00[c], g00[c] + g01[c], g00[c] - g01[c], -g01[c]};
          const T q1[4] = {g10[c], g10[c] + g11[c], g10[c] - g11[c], -g11[c]};
          for (int j = 0; j < 4; ++j) {
            o[j * stride + c] = q0[j];
            o[(4 + j) * stride + c] = q0[j] + q1[j];
            o[(8 + j) * stride + c] = q0[j] - q1[j];
            o[(12 + j) * stride + c] = -q1[j];
          }
        }
      }
}

// dx images [n0, n0 + nb) from Z[ξ] (T, C): the tiles B Z_t Bᵀ summed into Dp (nb, HP, WP,
// C), then transposed into dx without the padding.
template <typename T>
void inverse_input_nhwc(const Plan& p, const T* Z, int64_t n0, int64_t nb, T* Dp, T* dx) {
  const WinogradShape& s = p.s;
  const int64_t C = s.C, HP = 2 * p.TH + 2, WP = 2 * p.TW + 2, nT = nb * p.TH * p.TW;
  const int64_t stride = nT * C, HW = s.H * s.W;
  std::fill(Dp, Dp + nb * HP * WP * C, T(0));
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t th = 0; th < p.TH; ++th)
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        const int64_t t = (nl * p.TH + th) * p.TW + tw;
        const T* __restrict z = Z + t * C;
        T* base = Dp + ((nl * HP + 2 * th) * WP + 2 * tw) * C;
        T* __restrict d[16];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) d[4 * i + j] = base + (i * WP + j) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          // Rows: B Z = (Z0, Z1 − Z2 + Z3, −Z0 + Z1 + Z2, −Z3), per column j; then columns.
          T w[4][4];
          for (int j = 0; j < 4; ++j) {
            const T a0 = z[j * stride + c], a1 = z[(4 + j) * stride + c],
                    a2 = z[(8 + j) * stride + c], a3 = z[(12 + j) * stride + c];
            w[0][j] = a0;
            w[1][j] = a1 - a2 + a3;
            w[2][j] = -a0 + a1 + a2;
            w[3][j] = -a3;
          }
          for (int k = 0; k < 4; ++k) {
            d[4 * k][c] += w[k][0];
            d[4 * k + 1][c] += w[k][1] - w[k][2] + w[k][3];
            d[4 * k + 2][c] += -w[k][0] + w[k][1] + w[k][2];
            d[4 * k + 3][c] += -w[k][3];
          }
        }
      }
  constexpr int64_t kCB = 16;
  for (int64_t nl = 0; nl < nb; ++nl)
    for (int64_t c0 = 0; c0 < C; c0 += kCB) {
      const int64_t cb = std::min(kCB, C - c0);
      T* dst = dx + ((n0 + nl) * C + c0) * HW;
      for (int64_t ih = 0; ih < s.H; ++ih) {
        const T* src = Dp + ((nl * HP + ih + s.ph) * WP + s.pw) * C + c0;
        for (int64_t c = 0; c < cb; ++c)
          for (int64_t iw = 0; iw < s.W; ++iw) dst[c * HW + ih * s.W + iw] = src[iw * C + c];
      }
    }
}

// Scratch of one thread: two transformed buffers (16, max(C, Co), tmax) and the lines.
template <typename T>
struct Scratch {
  Tensor buf, lines;
  T* a;
  T* b;
  Lines<T> L;
  Tensor imgs;
  T* img = nullptr;   // channel layout: padded NHWC images (nb, HP, WP, max(C, Co))
  T* sink = nullptr;  // channel layout: Co values for outputs past the edge
  explicit Scratch(const Plan& p) {
    const int64_t cmax = std::max(p.s.C, p.s.Co), n = kXi * cmax * p.tmax;
    buf = workspace<T>(2 * n);
    a = buf.data<T>();
    b = a + n;
    if (p.nhwc) {
      const int64_t nimg = (p.rpc / p.TH) * (2 * p.TH + 2) * (2 * p.TW + 2) * cmax;
      imgs = workspace<T>(nimg + p.s.Co);
      img = imgs.data<T>();
      sink = img + nimg;
    }
    L.ld = p.TW + 1;
    lines = workspace<T>(2 * p.TW + 4 + kLines * L.ld);
    L.pad = lines.data<T>();
    L.v = L.pad + 2 * p.TW + 4;
  }
};

template <typename T>
void forward_chunk(const Plan& p, const T* x, const T* U, const T* b, T* y, int64_t c,
                   Scratch<T>& sc) {
  const WinogradShape& s = p.s;
  const int64_t r0 = c * p.rpc, r1 = std::min(p.rows, r0 + p.rpc), nT = (r1 - r0) * p.TW;
  T* V = sc.a;
  T* M = sc.b;
  if (p.nhwc) {
    const int64_t n0 = r0 / p.TH, nb = (r1 - r0) / p.TH;
    pack_input_nhwc(p, x, n0, nb, sc.img);
    transform_input_nhwc(p, sc.img, nb, V);
    for (int64_t q = 0; q < kXi; ++q)
      cpu::gemm_serial(false, true, nT, s.Co, s.C, T(1), V + q * nT * s.C, s.C,
                       U + q * s.Co * s.C, s.C, T(0), M + q * nT * s.Co, s.Co);
    transform_output_nhwc(p, M, b, n0, nb, sc.img, sc.sink, y);
    return;
  }
  transform_input(p, x, r0, r1, V, sc.L);
  for (int64_t q = 0; q < kXi; ++q)
    cpu::gemm_serial(false, false, s.Co, nT, s.C, T(1), U + q * s.Co * s.C, s.C, V + q * s.C * nT,
                     nT, T(0), M + q * s.Co * nT, nT);
  transform_output(p, M, b, r0, r1, y, sc.L);
}

template <typename T>
void backward_chunk(const Plan& p, const T* dy, const T* x, const T* U, T* dx, T* dU, T dU_beta,
                    int64_t c,
                    Scratch<T>& sc) {
  const WinogradShape& s = p.s;
  const int64_t r0 = c * p.rpc, r1 = std::min(p.rows, r0 + p.rpc), nT = (r1 - r0) * p.TW;
  T* Gh = sc.a;
  T* V = sc.b;
  if (p.nhwc) {
    const int64_t n0 = r0 / p.TH, nb = (r1 - r0) / p.TH;
    pack_grad_nhwc(p, dy, n0, nb, sc.img);
    transform_grad_nhwc(p, sc.img, nb, Gh);
    if (dU) {
      pack_input_nhwc(p, x, n0, nb, sc.img);
      transform_input_nhwc(p, sc.img, nb, V);
      for (int64_t q = 0; q < kXi; ++q)
        cpu::gemm_serial(true, false, s.Co, s.C, nT, T(1), Gh + q * nT * s.Co, s.Co,
                         V + q * nT * s.C, s.C, dU_beta, dU + q * s.Co * s.C, s.C);
    }
    if (dx) {
      for (int64_t q = 0; q < kXi; ++q)
        cpu::gemm_serial(false, false, nT, s.C, s.Co, T(1), Gh + q * nT * s.Co, s.Co,
                         U + q * s.Co * s.C, s.C, T(0), V + q * nT * s.C, s.C);
      inverse_input_nhwc(p, V, n0, nb, sc.img, dx);
    }
    return;
  }
  transform_grad(p, dy, r0, r1, Gh, sc.L);
  if (dU) {
    transform_input(p, x, r0, r1, V, sc.L);
    for (int64_t q = 0; q < kXi; ++q)
      cpu::gemm_serial(false, true, s.Co, s.C, nT, T(1), Gh + q * s.Co * nT, nT,
                       V + q * s.C * nT, nT, dU_beta, dU + q * s.Co * s.C, s.C);
  }
  if (dx) {
    for (int64_t q = 0; q < kXi; ++q)
      cpu::gemm_serial(true, false, s.C, nT, s.Co, T(1), U + q * s.Co * s.C, s.C,
                       Gh + q * s.Co * nT, nT, T(0), V + q * s.C * nT, nT);
    inverse_input(p, V, r0, r1, dx, sc.L);
  }
}

}  // namespace

ConvAlgo conv_algo() {
  int a = g_algo.load(std::memory_order_relaxed);
  if (a < 0) {
    int expected = -1;
    g_algo.compare_exchange_strong(expected, static_cast<int>(algo_from_env()));
    a = g_algo.load(std::memory_order_relaxed);
  }
  return static_cast<ConvAlgo>(a);
}

void set_conv_algo(ConvAlgo algo) { g_algo.store(static_cast<int>(algo)); }

WinogradLayout winograd_layout() { return static_cast<WinogradLayout>(g_layout.load()); }
void set_winograd_layout(WinogradLayout layout) { g_layout.store(static_cast<int>(layout)); }

bool winograd_applies(const Shape& xs, const Shape& ws, const Conv2dArgs& a) {
  if (xs.size() != 4 || ws.size() != 4) return false;
  if (ws[2] != 3 || ws[3] != 3 || a.groups != 1) return false;
  if (a.stride[0] != 1 || a.stride[1] != 1 || a.dilation[0] != 1 || a.dilation[1] != 1)
    return false;
  if (a.padding[0] < 0 || a.padding[1] < 0) return false;
  return xs[0] > 0 && xs[2] > 0 && xs[3] > 0 && xs[1] == ws[1] &&
         xs[2] + 2 * a.padding[0] - 2 >= 1 && xs[3] + 2 * a.padding[1] - 2 >= 1;
}

bool use_winograd(const Shape& xs, const Shape& ws, const Conv2dArgs& a) {
  if (!winograd_applies(xs, ws, a)) return false;
  switch (conv_algo()) {
    case ConvAlgo::Im2col: return false;
    case ConvAlgo::Winograd: return true;
    case ConvAlgo::Auto: break;
  }
  const int64_t C = xs[1], Co = ws[0];
  const int64_t Ho = xs[2] + 2 * a.padding[0] - 2, Wo = xs[3] + 2 * a.padding[1] - 2;
  const int64_t tiles = ((Ho + 1) / 2) * ((Wo + 1) / 2);
  const bool channels = (C >= kMinInChannels && Co >= kMinOutChannels) ||
                        (C >= kMinInChannelsNarrowOut && Co >= kMinOutChannelsNarrow);
  return channels && 2 * tiles <= Ho * Wo;
}

WinogradShape winograd_shape(const Shape& xs, const Shape& ws, const Conv2dArgs& a) {
  WinogradShape s{};
  s.N = xs[0];
  s.C = xs[1];
  s.Co = ws[0];
  s.H = xs[2];
  s.W = xs[3];
  s.ph = a.padding[0];
  s.pw = a.padding[1];
  s.Ho = s.H + 2 * s.ph - 2;
  s.Wo = s.W + 2 * s.pw - 2;
  return s;
}

template <typename T>
void winograd_conv_forward(const WinogradShape& s, const T* x, const T* w, const T* b, T* y) {
  const Plan p = make_plan(s, sizeof(T));
  Tensor ut = workspace<T>(kXi * s.Co * s.C);
  T* U = ut.data<T>();
#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    transform_weights(s, w, U);
    Scratch<T> sc(p);
#pragma omp for schedule(dynamic)
    for (int64_t c = 0; c < p.nc; ++c) forward_chunk(p, x, U, b, y, c, sc);
  }
}

template <typename T>
void winograd_conv_backward(const WinogradShape& s, const T* dy, const T* x, const T* w, T* dx,
                            T* dw) {
  if (!dx && !dw) return;
  const Plan p = make_plan(s, sizeof(T));
  const int64_t usize = kXi * s.Co * s.C;
  Tensor ut = dx ? workspace<T>(usize) : Tensor();
  T* U = dx ? ut.data<T>() : nullptr;
  // dU per thread, summed by the inverse transform.
  Tensor dut = dw ? workspace<T>(usize * p.threads) : Tensor();
  T* dU = dw ? dut.data<T>() : nullptr;
  // Chunks that start mid-image share two dx rows with the previous chunk: those rows are
  // zeroed first and accumulated, and neighbouring chunks run in different rounds.
  const bool split = p.rpc % p.TH != 0;
  const int64_t rounds = dx && p.threads > 1 && split ? 2 : 1;
#pragma omp parallel num_threads(p.threads) if (p.threads > 1)
  {
    if (dx) {
      transform_weights(s, w, U);
      if (split) {
#pragma omp for schedule(static)
        for (int64_t c = 1; c < p.nc; ++c) {
          const int64_t r0 = c * p.rpc, n = r0 / p.TH, ih = 2 * (r0 % p.TH) - s.ph;
          if (r0 % p.TH == 0) continue;
          for (int64_t ci = 0; ci < s.C; ++ci)
            for (int64_t i = std::max<int64_t>(ih, 0); i < std::min(ih + 2, s.H); ++i)
              std::fill_n(dx + ((n * s.C + ci) * s.H + i) * s.W, s.W, T(0));
        }
      }
    }
    // A thread's first chunk overwrites its dU (beta = 0), later ones accumulate; a thread
    // that got no chunk zeroes it.
    T* my_dU = dw ? dU + omp_get_thread_num() * usize : nullptr;
    T beta = T(0);
    Scratch<T> sc(p);
    for (int64_t round = 0; round < rounds; ++round) {
#pragma omp for schedule(dynamic)
      for (int64_t c = round; c < p.nc; c += rounds) {
        backward_chunk(p, dy, x, U, dx, my_dU, beta, c, sc);
        beta = T(1);
      }
    }
    if (dw && beta == T(0)) std::fill(my_dU, my_dU + usize, T(0));
#pragma omp barrier
    if (dw) inverse_weights(s, dU, omp_get_num_threads(), usize, dw);
  }
}

template void winograd_conv_forward<float>(const WinogradShape&, const float*, const float*,
                                           const float*, float*);
template void winograd_conv_forward<double>(const WinogradShape&, const double*, const double*,
                                            const double*, double*);
template void winograd_conv_backward<float>(const WinogradShape&, const float*, const float*,
                                            const float*, float*, float*);
template void winograd_conv_backward<double>(const WinogradShape&, const double*, const double*,
                                             const double*, double*, double*);

}  // namespace lb::detail
