// CUDA conv2d kernels, the twins of src/cpu/conv2d.cpp (src/backend/conv2d.h): im2col of a
// chunk of images into columns (m, C·kH·kW, Ho·Wo), then one batched cuBLAS GEMM over
// (image, group) through the device's GEMM table, whose output is y's own layout (no
// permute). The backward rebuilds the columns for dw (the GEMM sums over the chunk's
// images into dw) and gathers dx from the GEMM's column gradient (col2im, one thread per
// input element: no atomics). Chunks keep the column matrix under kColsBudget bytes.
// There is no Winograd here: the CPU's Winograd path and this one agree to rounding.
#include <algorithm>
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/views.h"
#include "lb/core/dispatch.h"
#include "src/backend/conv2d.h"
#include "src/backend/gemm.h"

namespace lb::backend {
namespace {

using detail::ConvGeom;

constexpr int64_t kColsBudget = int64_t{256} << 20;

// cols (m, C·kH·kW, P) of images [n0, n0+m) of x (N, C, H, W); zero where the window is
// in the padding.
template <typename T>
__global__ void im2col_kernel(const T* x, ConvGeom g, int64_t C, int64_t n0, int64_t m, T* cols) {
  const int64_t P = g.Ho * g.Wo, kk = g.kH * g.kW, K = C * kk;
  LB_CUDA_FOR_EACH(i, m * K * P) {
    const int64_t p = i % P, r = (i / P) % K, n = i / (P * K);
    const int64_t c = r / kk, ki = (r % kk) / g.kW, kj = r % g.kW;
    const int64_t ih = (p / g.Wo) * g.sh - g.ph + ki * g.dh, iw = (p % g.Wo) * g.sw - g.pw + kj * g.dw;
    cols[i] = ih >= 0 && ih < g.H && iw >= 0 && iw < g.W ? x[((n0 + n) * C + c) * g.H * g.W + ih * g.W + iw] : T(0);
  }
}

// dx of images [n0, n0+m) = the adjoint of im2col applied to dcols (m, C·kH·kW, P): each
// input element gathers the column entries that read it.
template <typename T>
__global__ void col2im_kernel(const T* dcols, ConvGeom g, int64_t C, int64_t n0, int64_t m, T* dx) {
  const int64_t P = g.Ho * g.Wo, kk = g.kH * g.kW, K = C * kk, HW = g.H * g.W;
  LB_CUDA_FOR_EACH(e, m * C * HW) {
    const int64_t iw = e % g.W, ih = (e / g.W) % g.H, c = (e / HW) % C, n = e / (HW * C);
    const T* dn = dcols + n * K * P;
    T acc = 0;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      const int64_t hn = ih + g.ph - ki * g.dh;
      if (hn < 0 || hn % g.sh != 0 || hn / g.sh >= g.Ho) continue;
      const int64_t oh = hn / g.sh;
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const int64_t wn = iw + g.pw - kj * g.dw;
        if (wn < 0 || wn % g.sw != 0 || wn / g.sw >= g.Wo) continue;
        acc += dn[(c * kk + ki * g.kW + kj) * P + oh * g.Wo + wn / g.sw];
      }
    }
    dx[(n0 * C) * HW + e] = acc;
  }
}

// y (N, Co, P) := b[co]
template <typename T>
__global__ void fill_bias_kernel(const T* b, T* y, int64_t Co, int64_t P, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) y[i] = b[(i / P) % Co];
}

// db[co] = Σ_n Σ_p dy[n, co, p], one block per channel.
template <typename T>
__global__ void bias_grad_kernel(const T* dy, T* db, int64_t N, int64_t Co, int64_t P) {
  __shared__ T shared[cuda::kWarps];
  for (int64_t co = blockIdx.x; co < Co; co += gridDim.x) {
    T acc = 0;
    for (int64_t i = threadIdx.x; i < N * P; i += blockDim.x) acc += dy[((i / P) * Co + co) * P + i % P];
    acc = cuda::block_reduce<T, false>(acc, shared);
    if (threadIdx.x == 0) db[co] = acc;
  }
}

struct Chunking {
  int64_t N, C, Co, G, Cog, Kg, K, P, m;
  Chunking(const Shape& xs, const Shape& ws, const Conv2dArgs& args, const ConvGeom& g, size_t elem)
      : N(xs[0]), C(xs[1]), Co(ws[0]), G(args.groups), Cog(ws[0] / args.groups), Kg(ws[1] * ws[2] * ws[3]),
        K(xs[1] * ws[2] * ws[3]), P(g.Ho * g.Wo) {
    const int64_t per_image = std::max<int64_t>(1, K * P * static_cast<int64_t>(elem));
    m = std::clamp<int64_t>(kColsBudget / per_image, 1, std::max<int64_t>(1, N));
  }
};

template <typename T>
void launch_im2col(const Tensor& x, const ConvGeom& g, const Chunking& c, int64_t n0, int64_t m, Tensor& cols,
                   cudaStream_t s) {
  im2col_kernel<T><<<cuda::blocks_for(m * c.K * c.P), cuda::kThreads, 0, s>>>(x.data<T>(), g, c.C, n0, m,
                                                                              cols.data<T>());
  LB_CUDA_CHECK_LAUNCH("im2col_kernel");
}

void forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dArgs& args, const ConvGeom& g,
             Tensor& y) {
  if (y.numel() == 0) return;
  const Chunking c(x.shape(), w.shape(), args, g, dtype_size(x.dtype()));
  const cudaStream_t s = cuda::stream(x.device().index);
  const GemmKernels& gemm = gemm_kernels(x.device());
  detail::dispatch_float(x.dtype(), "conv2d on CUDA", [&](auto tag) {
    using T = decltype(tag);
    if (b.defined()) {
      fill_bias_kernel<T><<<cuda::blocks_for(y.numel()), cuda::kThreads, 0, s>>>(b.data<T>(), y.data<T>(), c.Co,
                                                                                c.P, y.numel());
      LB_CUDA_CHECK_LAUNCH("fill_bias_kernel");
    }
    const Tensor wv = views::view(w, {1, c.G, c.Cog, c.Kg});
    Tensor cols = Tensor::empty({c.m * c.K * c.P}, x.dtype(), x.device(), MemTag::Workspace);
    for (int64_t n0 = 0; n0 < c.N; n0 += c.m) {
      const int64_t m = std::min(c.m, c.N - n0);
      launch_im2col<T>(x, g, c, n0, m, cols, s);
      Tensor yv = views::view(views::slice(y, 0, n0, n0 + m), {m, c.G, c.Cog, c.P});
      gemm.gemm_into(yv, wv, false, views::view(views::slice(cols, 0, 0, m * c.K * c.P), {m, c.G, c.Kg, c.P}), false, {m, c.G},
                     b.defined());
    }
  });
}

void backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Shape& xs, const Shape& ws,
              const Conv2dArgs& args, const ConvGeom& g, Tensor& dx, Tensor& dw, Tensor& db) {
  if (dy.numel() == 0) {
    for (Tensor* t : {&dx, &dw, &db})
      if (t->defined()) t->zero_();
    return;
  }
  const Chunking c(xs, ws, args, g, dtype_size(dy.dtype()));
  const cudaStream_t s = cuda::stream(dy.device().index);
  const GemmKernels& gemm = gemm_kernels(dy.device());
  detail::dispatch_float(dy.dtype(), "conv2d backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    if (db.defined()) {
      bias_grad_kernel<T><<<cuda::row_blocks(c.Co), cuda::kThreads, 0, s>>>(dy.data<T>(), db.data<T>(), c.N, c.Co,
                                                                            c.P);
      LB_CUDA_CHECK_LAUNCH("bias_grad_kernel");
    }
    if (!dx.defined() && !dw.defined()) return;
    Tensor cols = Tensor::empty({c.m * c.K * c.P}, dy.dtype(), dy.device(), MemTag::Workspace);
    for (int64_t n0 = 0; n0 < c.N; n0 += c.m) {
      const int64_t m = std::min(c.m, c.N - n0);
      const Tensor dyv = views::view(views::slice(dy, 0, n0, n0 + m), {m, c.G, c.Cog, c.P});
      Tensor colv = views::view(views::slice(cols, 0, 0, m * c.K * c.P), {m, c.G, c.Kg, c.P});
      if (dw.defined()) {
        // dw_g (Cog, Kg) (+)= Σ over the chunk's images of dy_g (Cog, P) · cols_gᵀ (P, Kg)
        launch_im2col<T>(x, g, c, n0, m, cols, s);
        Tensor dwv = views::view(dw, {c.G, c.Cog, c.Kg});
        gemm.gemm_into(dwv, dyv, false, colv, true, {m, c.G}, n0 > 0);
      }
      if (dx.defined()) {
        // dcols_g (Kg, P) = w_gᵀ (Kg, Cog) · dy_g (Cog, P), then gathered back into dx.
        gemm.gemm_into(colv, views::view(w, {1, c.G, c.Cog, c.Kg}), true, dyv, false, {m, c.G}, false);
        col2im_kernel<T><<<cuda::blocks_for(m * c.C * g.H * g.W), cuda::kThreads, 0, s>>>(
            cols.data<T>(), g, c.C, n0, m, dx.data<T>());
        LB_CUDA_CHECK_LAUNCH("col2im_kernel");
      }
    }
  });
}

}  // namespace

const Conv2dKernels kCudaConv2d{forward, backward};

}  // namespace lb::backend
