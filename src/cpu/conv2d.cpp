// CPU conv2d kernels (src/backend/conv2d.h) on NCHW as im2col + GEMM, forward and backward
// side by side; backward is split into
// a data part (grad_input = col2im(Wᵀ · grad_output)) and a filter part (grad_weight =
// grad_output · colsᵀ, grad_bias = Σ grad_output). Only x and w are saved; the column matrix
// is rebuilt from x in backward (it is kH·kW times larger than x).
//
// Batching: images are processed in chunks of nb whose columns sit side by side in one
// matrix (K, nb·P), P = Ho·Wo, so one GEMM per group covers the chunk. This keeps GEMMs wide
// when images are small (a 4×4 ResNet stage has P = 16). When P alone is wide enough, nb = 1:
// the GEMMs read and write the tensors in place (no permute copies) and the image goes in
// tiles of output rows (~512 KiB of columns) that are still in L2 when the GEMM reads them.
// A 1×1 stride-1 unpadded convolution of one image skips im2col: x is its column matrix.
// 3×3 stride-1 convolutions with enough channels go to Winograd F(2×2, 3×3) instead
// (winograd_conv.h; LEANBACK_CONV_ALGO=im2col forces this file's path for them).
//
// Threads: with enough work, chunks of images are split over OpenMP threads and each thread
// runs im2col, single-threaded GEMMs and col2im for its chunks (OpenBLAS is set to one thread
// meanwhile): no fork/join per GEMM and no OpenMP/OpenBLAS pools fighting over the cores.
// The filter gradient is accumulated per thread and summed at the end; chunks are handed out
// dynamically, so a thread that loses its core to another process does not hold up the rest.
// Small convolutions run on the calling thread, with OpenBLAS threading its GEMMs as it sees
// fit. (Letting OpenBLAS thread each GEMM between OpenMP im2col loops instead was measured
// far slower: OpenMP workers spin-wait after each loop and starve the BLAS threads.)
#include <cblas.h>  // openblas_set_num_threads
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "lb/core/dispatch.h"
#include "src/backend/conv2d.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/im2col.h"
#include "src/cpu/winograd_conv.h"

namespace lb::backend {

namespace {

constexpr int64_t kParallelMin = 1 << 15;
// Chunking: aim for GEMMs at least this many columns wide, with a column buffer of at most
// kColsBudget bytes per thread (it stays in L3 between im2col and the GEMM that reads it;
// smaller budgets measured slower on the 4×4 and 8×8 ResNet stages).
constexpr int64_t kTargetCols = 1024;
constexpr int64_t kColsBudget = 8 << 20;
// Row tiles of one image: about this many bytes of columns, at least this many columns.
constexpr int64_t kTileBytes = 512 << 10;
constexpr int64_t kMinTileCols = 128;
// Below this many forward FLOPs the convolution stays on the calling thread.
constexpr int64_t kParallelFlops = 1 << 22;

struct ConvPlan {
  int64_t N, C, Co, G;  // batch, in/out channels, groups
  int64_t Cg, Cog, Kg;  // per group: in channels, out channels, GEMM depth Cg·kH·kW
  int64_t K;            // rows of the full column matrix, C·kH·kW
  int64_t P;            // output positions per image, Ho·Wo
  detail::ConvGeom g;
  bool direct;  // 1×1, stride 1, no padding: x is its own column matrix
  int64_t nb;   // images per chunk
  int64_t rows;      // with nb = 1: output rows per tile of one image
  int64_t cols_max;  // widest column tile (0 when none is built: direct with nb = 1)
  int threads;  // > 1: chunks split over OpenMP threads, each running single-threaded GEMMs
  bool winograd;  // computed by winograd_conv instead (the fields above then go unused)
  detail::WinogradShape ws;
};

ConvPlan make_plan(const Shape& xs, const Shape& ws, const Conv2dArgs& args, const detail::ConvGeom& g,
                   size_t elem) {
  ConvPlan p{};
  p.N = xs[0];
  p.C = xs[1];
  p.Co = ws[0];
  p.G = args.groups;
  p.Cg = p.C / p.G;
  p.Cog = p.Co / p.G;
  p.g = g;
  p.Kg = p.Cg * ws[2] * ws[3];
  p.K = p.C * ws[2] * ws[3];
  p.P = p.g.Ho * p.g.Wo;
  p.direct = ws[2] == 1 && ws[3] == 1 && p.g.sh == 1 && p.g.sw == 1 && p.g.ph == 0 && p.g.pw == 0;
  const int64_t per_image = std::max<int64_t>(1, p.K * p.P * static_cast<int64_t>(elem));
  p.nb = std::max<int64_t>(1, (kTargetCols + p.P - 1) / std::max<int64_t>(1, p.P));
  p.nb = std::min(p.nb, std::max<int64_t>(1, kColsBudget / per_image));
  p.nb = std::max<int64_t>(1, std::min(p.nb, p.N));
  // Images split over OpenMP threads when there is enough work; each thread then runs
  // single-threaded GEMMs on whole chunks (no fork/join inside a chunk, no nesting).
  p.threads = 1;
  const int64_t nt = omp_get_max_threads();
  if (nt > 1 && p.N > 1 && 2 * p.N * p.Co * p.Kg * p.P > kParallelFlops) {
    p.nb = std::min(p.nb, (p.N + nt - 1) / nt);
    p.threads = static_cast<int>(std::min<int64_t>(nt, (p.N + p.nb - 1) / p.nb));
  }
  // One image per chunk: tiles of whole output rows, about kTileBytes of columns each (they
  // are written by im2col and read by the GEMM while still in L2), at least kMinTileCols wide.
  const int64_t row_bytes = p.K * p.g.Wo * static_cast<int64_t>(elem);
  p.rows = std::max(kTileBytes / std::max<int64_t>(1, row_bytes),
                    (kMinTileCols + p.g.Wo - 1) / p.g.Wo);
  p.rows = std::clamp<int64_t>(p.rows, 1, p.g.Ho);
  p.cols_max = p.nb > 1 ? p.nb * p.P : p.direct ? 0 : p.rows * p.g.Wo;
  p.winograd = detail::use_winograd(xs, ws, args);
  if (p.winograd) p.ws = detail::winograd_shape(xs, ws, args);
  return p;
}

using cpu::gemm_serial;

// A tile of the column matrix: images [n0, n0+m), output rows [oh0, oh1) of each, so
// pt = (oh1 − oh0)·Wo columns per image and cols (K, m·pt) with image n at column n·pt.
struct Tile {
  int64_t n0, m, oh0, oh1;
};

template <typename T>
void im2col_tile(const ConvPlan& p, const T* x, const Tile& t, T* cols, bool par) {
  const int64_t HW = p.g.H * p.g.W, kk = p.g.kH * p.g.kW;
  const int64_t pt = (t.oh1 - t.oh0) * p.g.Wo, ld = t.m * pt;
#pragma omp parallel for collapse(2) if (par && p.K * ld > kParallelMin) schedule(static)
  for (int64_t n = 0; n < t.m; ++n)
    for (int64_t c = 0; c < p.C; ++c)
      detail::im2col_plane(x + ((t.n0 + n) * p.C + c) * HW, p.g, t.oh0, t.oh1,
                           cols + c * kk * ld + n * pt, ld);
}

// dx of the tile's images += col2im(dcols (K, m·pt)).
template <typename T>
void col2im_tile(const ConvPlan& p, const T* dcols, const Tile& t, T* dx, bool par) {
  const int64_t HW = p.g.H * p.g.W, kk = p.g.kH * p.g.kW;
  const int64_t pt = (t.oh1 - t.oh0) * p.g.Wo, ld = t.m * pt;
#pragma omp parallel for collapse(2) if (par && p.K * ld > kParallelMin) schedule(static)
  for (int64_t n = 0; n < t.m; ++n)
    for (int64_t c = 0; c < p.C; ++c)
      detail::col2im_plane(dcols + c * kk * ld + n * pt, ld, p.g, t.oh0, t.oh1,
                           dx + ((t.n0 + n) * p.C + c) * HW);
}

// Makes OpenBLAS single-threaded for its lifetime (restoring the previous count), so GEMMs
// called from several OpenMP threads at once do not each wake the BLAS pool.
class BlasSingleThread {
 public:
  explicit BlasSingleThread(bool active) : prev_(active ? openblas_get_num_threads() : 0) {
    if (prev_ > 1) openblas_set_num_threads(1);
  }
  ~BlasSingleThread() {
    if (prev_ > 1) openblas_set_num_threads(prev_);
  }
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;

 private:
  int prev_;
};

template <typename T>
Tensor workspace(int64_t n) {
  return Tensor::empty({n}, DTypeOf<T>::value, Device::cpu(), MemTag::Workspace);
}

// Images [n0, n0+m) of y (N, Co, P) = conv(x, w) + b. cols (K, cols_max) and tmp
// (Co, nb·P) are scratch; `par` lets the copy loops use OpenMP (false inside a parallel region).
template <typename T>
void forward_chunk(const ConvPlan& p, const T* x, const T* w, const T* b, T* y, int64_t n0,
                   int64_t m, T* cols, T* tmp, bool par) {
  const int64_t P = p.P, Wo = p.g.Wo;
  if (m == 1) {
    // GEMMs straight into y (N, Co, P), whose bias is pre-filled and accumulated onto (beta
    // = 1). One image goes in tiles of output rows so that its columns stay in cache.
    T* yn = y + n0 * p.Co * P;
    if (b)
      for (int64_t co = 0; co < p.Co; ++co) std::fill(yn + co * P, yn + (co + 1) * P, b[co]);
    const T beta = b ? T(1) : T(0);
    if (p.direct) {
      const T* xn = x + n0 * p.C * P;
      for (int64_t grp = 0; grp < p.G; ++grp)
        gemm_serial(false, false, p.Cog, P, p.Kg, T(1), w + grp * p.Cog * p.Kg, p.Kg,
                    xn + grp * p.Kg * P, P, beta, yn + grp * p.Cog * P, P);
      return;
    }
    for (int64_t oh0 = 0; oh0 < p.g.Ho; oh0 += p.rows) {
      const Tile t{n0, 1, oh0, std::min(p.g.Ho, oh0 + p.rows)};
      const int64_t ld = (t.oh1 - t.oh0) * Wo;
      im2col_tile(p, x, t, cols, par);
      for (int64_t grp = 0; grp < p.G; ++grp)
        gemm_serial(false, false, p.Cog, ld, p.Kg, T(1), w + grp * p.Cog * p.Kg, p.Kg,
                    cols + grp * p.Kg * ld, ld, beta, yn + grp * p.Cog * P + oh0 * Wo, P);
    }
    return;
  }
  // Several whole images: one GEMM per group over their side-by-side columns into tmp
  // (Co, m·P), then tmp -> y (m, Co, P), adding the bias on the way.
  const int64_t ld = m * P;
  im2col_tile(p, x, Tile{n0, m, 0, p.g.Ho}, cols, par);
  for (int64_t grp = 0; grp < p.G; ++grp)
    gemm_serial(false, false, p.Cog, ld, p.Kg, T(1), w + grp * p.Cog * p.Kg, p.Kg,
                cols + grp * p.Kg * ld, ld, T(0), tmp + grp * p.Cog * ld, ld);
#pragma omp parallel for collapse(2) if (par && m * p.Co * P > kParallelMin) schedule(static)
  for (int64_t n = 0; n < m; ++n)
    for (int64_t co = 0; co < p.Co; ++co) {
      const T* src = tmp + co * ld + n * P;
      T* dst = y + ((n0 + n) * p.Co + co) * P;
      const T bias = b ? b[co] : T(0);
      for (int64_t i = 0; i < P; ++i) dst[i] = src[i] + bias;
    }
}

// The backward of one tile whose output gradient, as a matrix Gm (Co, cols) with row stride
// ldg, is given: dw += filter part; dx (pre-zeroed) += data part. cols is scratch (K, cols),
// first holding the im2col columns, then reused for dcols.
template <typename T>
void backward_tile(const ConvPlan& p, const T* Gm, int64_t ldg, const T* x, const T* w, T* dx,
                   T* dw, const Tile& t, T* cols, bool par) {
  const int64_t ld = t.m * (t.oh1 - t.oh0) * p.g.Wo;
  if (dw) {
    // Filter part: dw_g (Cog, Kg) += G_g (Cog, cols) · cols_gᵀ (cols, Kg).
    im2col_tile(p, x, t, cols, par);
    for (int64_t grp = 0; grp < p.G; ++grp)
      gemm_serial(false, true, p.Cog, p.Kg, ld, T(1), Gm + grp * p.Cog * ldg, ldg,
                  cols + grp * p.Kg * ld, ld, T(1), dw + grp * p.Cog * p.Kg, p.Kg);
  }
  if (dx) {
    // Data part: dcols_g (Kg, cols) = w_gᵀ (Kg, Cog) · G_g (Cog, cols), then col2im.
    for (int64_t grp = 0; grp < p.G; ++grp)
      gemm_serial(true, false, p.Kg, ld, p.Cog, T(1), w + grp * p.Cog * p.Kg, p.Kg,
                  Gm + grp * p.Cog * ldg, ldg, T(0), cols + grp * p.Kg * ld, ld);
    col2im_tile(p, cols, t, dx, par);
  }
}

// Images [n0, n0+m) of the backward: dx (pre-zeroed unless direct) and dw += their filter
// gradient. dy (N, Co, P); cols (K, cols_max) and gbuf (Co, nb·P) are scratch.
template <typename T>
void backward_chunk(const ConvPlan& p, const T* dy, const T* x, const T* w, T* dx, T* dw,
                    int64_t n0, int64_t m, T* cols, T* gbuf, bool par) {
  const int64_t P = p.P, Wo = p.g.Wo;
  if (m == 1) {
    const T* G = dy + n0 * p.Co * P;  // (Co, P), in place
    if (p.direct) {
      // x is the column matrix and the GEMM writes dx itself.
      const T* xn = x + n0 * p.C * P;
      for (int64_t grp = 0; grp < p.G; ++grp) {
        if (dw)
          gemm_serial(false, true, p.Cog, p.Kg, P, T(1), G + grp * p.Cog * P, P,
                      xn + grp * p.Kg * P, P, T(1), dw + grp * p.Cog * p.Kg, p.Kg);
        if (dx)
          gemm_serial(true, false, p.Kg, P, p.Cog, T(1), w + grp * p.Cog * p.Kg, p.Kg,
                      G + grp * p.Cog * P, P, T(0), dx + n0 * p.C * P + grp * p.Kg * P, P);
      }
      return;
    }
    for (int64_t oh0 = 0; oh0 < p.g.Ho; oh0 += p.rows) {
      const Tile t{n0, 1, oh0, std::min(p.g.Ho, oh0 + p.rows)};
      backward_tile(p, G + oh0 * Wo, P, x, w, dx, dw, t, cols, par);
    }
    return;
  }
  // Several whole images: gather their output gradients side by side, G (Co, m·P).
  const int64_t ld = m * P;
#pragma omp parallel for collapse(2) if (par && m * p.Co * P > kParallelMin) schedule(static)
  for (int64_t n = 0; n < m; ++n)
    for (int64_t co = 0; co < p.Co; ++co)
      std::memcpy(gbuf + co * ld + n * P, dy + ((n0 + n) * p.Co + co) * P, sizeof(T) * P);
  backward_tile(p, gbuf, ld, x, w, dx, dw, Tile{n0, m, 0, p.g.Ho}, cols, par);
}

int64_t num_chunks(const ConvPlan& p) { return (p.N + p.nb - 1) / p.nb; }

// Scratch for one thread: cols (K, cols_max) and, for multi-image chunks, tmp (Co, nb·P).
template <typename T>
struct Scratch {
  Tensor cols, tmp;
  explicit Scratch(const ConvPlan& p) {
    if (p.cols_max > 0) cols = workspace<T>(p.K * p.cols_max);
    if (p.nb > 1) tmp = workspace<T>(p.Co * p.nb * p.P);
  }
  T* c() const { return cols.defined() ? cols.data<T>() : nullptr; }
  T* t() const { return tmp.defined() ? tmp.data<T>() : nullptr; }
};

// y (N, Co, P) = conv(x, w) + b.
template <typename T>
void conv2d_forward(const ConvPlan& p, const T* x, const T* w, const T* b, T* y) {
  if (p.winograd) return detail::winograd_conv_forward(p.ws, x, w, b, y);
  const int64_t nc = num_chunks(p);
  if (p.threads > 1) {
    BlasSingleThread single(true);
#pragma omp parallel num_threads(p.threads)
    {
      const Scratch<T> s(p);
#pragma omp for schedule(dynamic)
      for (int64_t c = 0; c < nc; ++c)
        forward_chunk(p, x, w, b, y, c * p.nb, std::min(p.nb, p.N - c * p.nb), s.c(), s.t(), false);
    }
    return;
  }
  const Scratch<T> s(p);
  for (int64_t c = 0; c < nc; ++c)
    forward_chunk(p, x, w, b, y, c * p.nb, std::min(p.nb, p.N - c * p.nb), s.c(), s.t(), true);
}

// Backward. dy (N, Co, P); dx (N, C, H, W), dw (Co, Cg, kH, kW), db (Co), each null when
// not wanted. dx and dw are overwritten.
template <typename T>
void conv2d_backward(const ConvPlan& p, const T* dy, const T* x, const T* w, T* dx, T* dw,
                     T* db) {
  const int64_t P = p.P;
  if (db) {
    // grad_bias[co] = Σ_n Σ_p dy[n, co, p].
#pragma omp parallel for if (p.N * p.Co * P > kParallelMin) schedule(static)
    for (int64_t co = 0; co < p.Co; ++co) {
      T acc = 0;
      for (int64_t n = 0; n < p.N; ++n) {
        const T* row = dy + (n * p.Co + co) * P;
        for (int64_t i = 0; i < P; ++i) acc += row[i];
      }
      db[co] = acc;
    }
  }
  if (!dx && !dw) return;
  if (p.winograd) return detail::winograd_conv_backward(p.ws, dy, x, w, dx, dw);
  const int64_t nc = num_chunks(p), dw_size = p.Co * p.Kg;
  if (dx && !(p.direct && p.nb == 1)) std::memset(dx, 0, sizeof(T) * p.N * p.C * p.g.H * p.g.W);
  if (dw) std::fill(dw, dw + dw_size, T(0));
  if (p.threads > 1) {
    // Each thread accumulates its images' filter gradient privately (thread 0 into dw);
    // the partial sums are added afterwards.
    Tensor partial = dw ? workspace<T>(dw_size * (p.threads - 1)) : Tensor();
    if (dw) partial.zero_();
    {
      BlasSingleThread single(true);
#pragma omp parallel num_threads(p.threads)
      {
        const Scratch<T> s(p);
        const int t = omp_get_thread_num();
        T* my_dw = !dw ? nullptr : t == 0 ? dw : partial.data<T>() + (t - 1) * dw_size;
#pragma omp for schedule(dynamic)
        for (int64_t c = 0; c < nc; ++c)
          backward_chunk(p, dy, x, w, dx, my_dw, c * p.nb, std::min(p.nb, p.N - c * p.nb), s.c(),
                         s.t(), false);
      }
    }
    if (dw) {
      const T* part = partial.data<T>();
      for (int t = 1; t < p.threads; ++t)
        for (int64_t i = 0; i < dw_size; ++i) dw[i] += part[(t - 1) * dw_size + i];
    }
    return;
  }
  const Scratch<T> s(p);
  for (int64_t c = 0; c < nc; ++c)
    backward_chunk(p, dy, x, w, dx, dw, c * p.nb, std::min(p.nb, p.N - c * p.nb), s.c(), s.t(),
                   true);
}

void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args, const detail::ConvGeom& g,
             Tensor& y) {
  if (y.numel() == 0) return;
  const ConvPlan p = make_plan(x.shape(), w.shape(), args, g, dtype_size(x.dtype()));
  detail::dispatch_float(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    conv2d_forward<T>(p, x.data<T>(), w.data<T>(), data_or_null<T>(b), y.data<T>());
  });
}

void backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Shape& xs, const Shape& ws,
              const Conv2dArgs& args, const detail::ConvGeom& g, Tensor& dx, Tensor& dw, Tensor& db) {
  if (dy.numel() == 0) {
    for (Tensor* t : {&dx, &dw, &db})
      if (t->defined()) t->zero_();
    return;
  }
  const ConvPlan p = make_plan(xs, ws, args, g, dtype_size(dy.dtype()));
  detail::dispatch_float(dy.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    conv2d_backward<T>(p, dy.data<T>(), data_or_null<T>(x), data_or_null<T>(w), data_or_null<T>(dx),
                       data_or_null<T>(dw), data_or_null<T>(db));
  });
}

}  // namespace

const Conv2dKernels kCpuConv2d{forward, backward};

}  // namespace lb::backend
