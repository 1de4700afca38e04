// CUDA pooling kernels, the twins of src/cpu/pool2d.cpp (src/backend/pool2d.h): one thread
// per output in the forward passes; the backward passes gather, one thread per input,
// over the outputs whose windows hold it (no atomics), adding them in the CPU's output
// order, so both devices give the same values.
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "src/backend/pool2d.h"

namespace lb::backend {
namespace {

template <typename F>
void dispatch_index(DType d, F&& f) {
  if (d == DType::U8) f(uint8_t{});
  else f(int32_t{});
}

// Outputs [*lo, *hi] whose windows (fixed: start o·s - p, length k) may hold input i.
__device__ inline void outputs_over(AvgPool mode, int64_t i, int64_t in, int64_t out, int64_t k, int64_t s,
                                    int64_t p, int64_t* lo, int64_t* hi) {
  if (mode == AvgPool::kAdaptive) {
    *lo = i * out / in;
    *hi = ((i + 1) * out + in - 1) / in - 1;
  } else {
    const int64_t first = i + p - k + 1;
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    *hi = (i + p) / s;
  }
  if (*hi > out - 1) *hi = out - 1;
}

template <typename T, typename I>
__global__ void max_forward_kernel(PoolGeom g, const T* x, T* y, I* idx) {
  constexpr bool kWindowPos = sizeof(I) == 1;
  LB_CUDA_FOR_EACH(o, g.planes * g.Ho * g.Wo) {
    const int64_t ow = o % g.Wo, oh = (o / g.Wo) % g.Ho, pl = o / (g.Wo * g.Ho);
    const T* xp = x + pl * g.H * g.W;
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    const int64_t i0 = h0 < 0 ? -h0 : 0, i1 = g.kH < g.H - h0 ? g.kH : g.H - h0;
    const int64_t j0 = w0 < 0 ? -w0 : 0, j1 = g.kW < g.W - w0 ? g.kW : g.W - w0;
    T best = -static_cast<T>(INFINITY);
    int64_t bi = i0, bj = j0;
    bool nan = false;
    for (int64_t i = i0; i < i1 && !nan; ++i)
      for (int64_t j = j0; j < j1; ++j) {
        const T v = xp[(h0 + i) * g.W + w0 + j];
        if (v > best || isnan(v)) {
          best = v;
          bi = i;
          bj = j;
          if ((nan = isnan(v))) break;
        }
      }
    y[o] = best;
    idx[o] = kWindowPos ? static_cast<I>(bi * g.kW + bj) : static_cast<I>((h0 + bi) * g.W + w0 + bj);
  }
}

template <typename T, typename I>
__global__ void max_backward_kernel(PoolGeom g, const T* dy, const I* idx, T* dx) {
  constexpr bool kWindowPos = sizeof(I) == 1;
  LB_CUDA_FOR_EACH(e, g.planes * g.H * g.W) {
    const int64_t iw = e % g.W, ih = (e / g.W) % g.H, pl = e / (g.W * g.H);
    const T* dyp = dy + pl * g.Ho * g.Wo;
    const I* ip = idx + pl * g.Ho * g.Wo;
    int64_t oh0, oh1, ow0, ow1;
    outputs_over(AvgPool::kFixed, ih, g.H, g.Ho, g.kH, g.sh, g.ph, &oh0, &oh1);
    outputs_over(AvgPool::kFixed, iw, g.W, g.Wo, g.kW, g.sw, g.pw, &ow0, &ow1);
    const int64_t self = ih * g.W + iw;
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = oh * g.Wo + ow;
        int64_t at;
        if (kWindowPos) {
          const int64_t pos = ip[o];
          at = (oh * g.sh - g.ph + pos / g.kW) * g.W + ow * g.sw - g.pw + pos % g.kW;
        } else {
          at = ip[o];
        }
        if (at == self) acc += dyp[o];
      }
    dx[e] = acc;
  }
}

template <typename T>
__global__ void avg_forward_kernel(PoolGeom g, AvgPool mode, const T* x, T* y) {
  LB_CUDA_FOR_EACH(o, g.planes * g.Ho * g.Wo) {
    const int64_t ow = o % g.Wo, oh = (o / g.Wo) % g.Ho, pl = o / (g.Wo * g.Ho);
    const T* xp = x + pl * g.H * g.W;
    int64_t h0, h1, w0, w1;
    avg_window(mode, oh, g.H, g.Ho, g.kH, g.sh, g.ph, &h0, &h1);
    avg_window(mode, ow, g.W, g.Wo, g.kW, g.sw, g.pw, &w0, &w1);
    T acc = 0;
    for (int64_t ih = h0; ih < h1; ++ih)
      for (int64_t iw = w0; iw < w1; ++iw) acc += xp[ih * g.W + iw];
    const int64_t div = mode == AvgPool::kFixed ? g.kH * g.kW : (h1 - h0) * (w1 - w0);
    y[o] = acc / static_cast<T>(div);
  }
}

template <typename T>
__global__ void avg_backward_kernel(PoolGeom g, AvgPool mode, const T* dy, T* dx) {
  LB_CUDA_FOR_EACH(e, g.planes * g.H * g.W) {
    const int64_t iw = e % g.W, ih = (e / g.W) % g.H, pl = e / (g.W * g.H);
    const T* dyp = dy + pl * g.Ho * g.Wo;
    int64_t oh0, oh1, ow0, ow1;
    outputs_over(mode, ih, g.H, g.Ho, g.kH, g.sh, g.ph, &oh0, &oh1);
    outputs_over(mode, iw, g.W, g.Wo, g.kW, g.sw, g.pw, &ow0, &ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh <= oh1; ++oh) {
      int64_t h0, h1;
      avg_window(mode, oh, g.H, g.Ho, g.kH, g.sh, g.ph, &h0, &h1);
      if (ih < h0 || ih >= h1) continue;
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        int64_t w0, w1;
        avg_window(mode, ow, g.W, g.Wo, g.kW, g.sw, g.pw, &w0, &w1);
        if (iw < w0 || iw >= w1) continue;
        const int64_t div = mode == AvgPool::kFixed ? g.kH * g.kW : (h1 - h0) * (w1 - w0);
        acc += dyp[oh * g.Wo + ow] / static_cast<T>(div);
      }
    }
    dx[e] = acc;
  }
}

cudaStream_t stream_of(const Tensor& t) { return cuda::stream(t.device().index); }

void max_forward(const PoolGeom& g, const Tensor& x, Tensor& y, Tensor& idx) {
  const int64_t n = g.planes * g.Ho * g.Wo;
  if (n == 0) return;
  detail::dispatch_float(x.dtype(), "max_pool2d on CUDA", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = decltype(itag);
      max_forward_kernel<T, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream_of(x)>>>(
          g, x.data<T>(), y.data<T>(), static_cast<I*>(idx.raw_data()));
    });
  });
  LB_CUDA_CHECK_LAUNCH("max_forward_kernel");
}

void max_backward(const PoolGeom& g, const Tensor& dy, const Tensor& idx, Tensor& dx) {
  const int64_t n = g.planes * g.H * g.W;
  if (n == 0) return;
  detail::dispatch_float(dy.dtype(), "max_pool2d backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = decltype(itag);
      max_backward_kernel<T, I><<<cuda::blocks_for(n), cuda::kThreads, 0, stream_of(dy)>>>(
          g, dy.data<T>(), static_cast<const I*>(idx.raw_data()), dx.data<T>());
    });
  });
  LB_CUDA_CHECK_LAUNCH("max_backward_kernel");
}

void avg_forward(const PoolGeom& g, AvgPool mode, const Tensor& x, Tensor& y) {
  const int64_t n = g.planes * g.Ho * g.Wo;
  if (n == 0) return;
  detail::dispatch_float(x.dtype(), "avg pool on CUDA", [&](auto tag) {
    using T = decltype(tag);
    avg_forward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream_of(x)>>>(g, mode, x.data<T>(),
                                                                                    y.data<T>());
  });
  LB_CUDA_CHECK_LAUNCH("avg_forward_kernel");
}

void avg_backward(const PoolGeom& g, AvgPool mode, const Tensor& dy, Tensor& dx) {
  const int64_t n = g.planes * g.H * g.W;
  if (n == 0) return;
  detail::dispatch_float(dy.dtype(), "avg pool backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    avg_backward_kernel<T><<<cuda::blocks_for(n), cuda::kThreads, 0, stream_of(dy)>>>(g, mode, dy.data<T>(),
                                                                                      dx.data<T>());
  });
  LB_CUDA_CHECK_LAUNCH("avg_backward_kernel");
}

}  // namespace

const Pool2dKernels kCudaPool2d{max_forward, max_backward, avg_forward, avg_backward};

}  // namespace lb::backend
