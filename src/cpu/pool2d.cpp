// CPU pooling kernels (src/backend/pool2d.h): every (n, c) plane is independent, so planes
// split across OpenMP threads; the backward of a plane adds its outputs' gradients in
// output order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "lb/core/dispatch.h"
#include "src/backend/pool2d.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 14;

template <typename F>
void dispatch_index(DType d, F&& f) {
  if (d == DType::U8) f(uint8_t{});
  else f(int32_t{});
}

// ---- max pool ----

template <typename T, typename I>
void max_pool_forward(const PoolGeom& g, const T* x, T* y, I* idx) {
  constexpr bool kWindowPos = sizeof(I) == 1;
#pragma omp parallel for if (g.planes * g.Ho * g.Wo * g.kH * g.kW > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * g.H * g.W;
    T* yp = y + pl * g.Ho * g.Wo;
    I* ip = idx + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh) {
      const int64_t h0 = oh * g.sh - g.ph;
      const int64_t i0 = std::max<int64_t>(0, -h0), i1 = std::min(g.kH, g.H - h0);
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t w0 = ow * g.sw - g.pw;
        const int64_t j0 = std::max<int64_t>(0, -w0), j1 = std::min(g.kW, g.W - w0);
        T best = -std::numeric_limits<T>::infinity();
        int64_t bi = i0, bj = j0;
        bool nan = false;
        for (int64_t i = i0; i < i1 && !nan; ++i) {
          const T* row = xp + (h0 + i) * g.W + w0;
          for (int64_t j = j0; j < j1; ++j) {
            const T v = row[j];
            if (v > best || std::isnan(v)) {
              best = v;
              bi = i;
              bj = j;
              if ((nan = std::isnan(v))) break;
            }
          }
        }
        yp[oh * g.Wo + ow] = best;
        ip[oh * g.Wo + ow] = kWindowPos ? static_cast<I>(bi * g.kW + bj)
                                        : static_cast<I>((h0 + bi) * g.W + w0 + bj);
      }
    }
  }
}

template <typename T, typename I>
void max_pool_backward(const PoolGeom& g, const T* dy, const I* idx, T* dx) {
  constexpr bool kWindowPos = sizeof(I) == 1;
#pragma omp parallel for if (g.planes * g.H * g.W > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    T* dxp = dx + pl * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + pl * g.Ho * g.Wo;
    const I* ip = idx + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const int64_t o = oh * g.Wo + ow;
        int64_t at;
        if constexpr (kWindowPos) {
          const int64_t pos = ip[o];
          at = (oh * g.sh - g.ph + pos / g.kW) * g.W + ow * g.sw - g.pw + pos % g.kW;
        } else {
          at = ip[o];
        }
        dxp[at] += dyp[o];
      }
  }
}

void max_forward(const PoolGeom& g, const Tensor& x, Tensor& y, Tensor& idx) {
  detail::dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = decltype(itag);
      max_pool_forward<T, I>(g, x.data<T>(), y.data<T>(), static_cast<I*>(idx.raw_data()));
    });
  });
}

void max_backward(const PoolGeom& g, const Tensor& dy, const Tensor& idx, Tensor& dx) {
  detail::dispatch_float(dy.dtype(), "max_pool2d backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(idx.dtype(), [&](auto itag) {
      using I = decltype(itag);
      max_pool_backward<T, I>(g, dy.data<T>(), static_cast<const I*>(idx.raw_data()), dx.data<T>());
    });
  });
}

// ---- average pools ----
// The windows of every output row and column, computed once per call.

struct AvgWindows {
  std::vector<int64_t> h0, h1, w0, w1;
  AvgWindows(const PoolGeom& g, AvgPool mode) : h0(g.Ho), h1(g.Ho), w0(g.Wo), w1(g.Wo) {
    for (int64_t oh = 0; oh < g.Ho; ++oh) avg_window(mode, oh, g.H, g.Ho, g.kH, g.sh, g.ph, &h0[oh], &h1[oh]);
    for (int64_t ow = 0; ow < g.Wo; ++ow) avg_window(mode, ow, g.W, g.Wo, g.kW, g.sw, g.pw, &w0[ow], &w1[ow]);
  }
  int64_t divisor(const PoolGeom& g, AvgPool mode, int64_t oh, int64_t ow) const {
    return mode == AvgPool::kFixed ? g.kH * g.kW : (h1[oh] - h0[oh]) * (w1[ow] - w0[ow]);
  }
};

template <typename T>
void avg_pool_forward(const PoolGeom& g, AvgPool mode, const T* x, T* y) {
  const AvgWindows win(g, mode);
#pragma omp parallel for if (g.planes * g.H * g.W > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * g.H * g.W;
    T* yp = y + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        T acc = 0;
        for (int64_t ih = win.h0[oh]; ih < win.h1[oh]; ++ih)
          for (int64_t iw = win.w0[ow]; iw < win.w1[ow]; ++iw) acc += xp[ih * g.W + iw];
        yp[oh * g.Wo + ow] = acc / static_cast<T>(win.divisor(g, mode, oh, ow));
      }
  }
}

template <typename T>
void avg_pool_backward(const PoolGeom& g, AvgPool mode, const T* dy, T* dx) {
  const AvgWindows win(g, mode);
#pragma omp parallel for if (g.planes * g.H * g.W > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    T* dxp = dx + pl * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const T v = dyp[oh * g.Wo + ow] / static_cast<T>(win.divisor(g, mode, oh, ow));
        for (int64_t ih = win.h0[oh]; ih < win.h1[oh]; ++ih)
          for (int64_t iw = win.w0[ow]; iw < win.w1[ow]; ++iw) dxp[ih * g.W + iw] += v;
      }
  }
}

void avg_forward(const PoolGeom& g, AvgPool mode, const Tensor& x, Tensor& y) {
  detail::dispatch_float(x.dtype(), "avg pool", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_forward<T>(g, mode, x.data<T>(), y.data<T>());
  });
}

void avg_backward(const PoolGeom& g, AvgPool mode, const Tensor& dy, Tensor& dx) {
  detail::dispatch_float(dy.dtype(), "avg pool backward", [&](auto tag) {
    using T = decltype(tag);
    avg_pool_backward<T>(g, mode, dy.data<T>(), dx.data<T>());
  });
}

}  // namespace

const Pool2dKernels kCpuPool2d{max_forward, max_backward, avg_forward, avg_backward};

}  // namespace lb::backend
