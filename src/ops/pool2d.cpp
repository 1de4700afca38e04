// 2-D pooling on NCHW (f32/f64), forward and backward side by side; every (n, c) plane is
// independent, so planes split across OpenMP threads. Semantics follow PyTorch's
// max_pool2d / avg_pool2d (ceil_mode=False, count_include_pad=True) and adaptive_avg_pool2d.
// Max pooling saves the argmax as its position inside the window (u8 when the window has at
// most 256 cells, else the i32 plane index): a quarter of an f32 output, and x is not kept.
// The average pools save nothing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/conv.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;
using detail::contiguous_nograd;

constexpr int64_t kParallelMin = 1 << 14;

struct PoolGeom {
  int64_t planes, H, W, kH, kW, sh, sw, ph, pw, Ho, Wo;
};

void check_pool_input(const Tensor& x, const char* op) {
  detail::check_defined(x, op, "x");
  detail::check_cpu(x, op);
  detail::check_floating(x, op);
  LB_CHECK(x.dim() == 4, op, ": x must be (N, C, H, W), got ", shape_str(x.shape()));
}

PoolGeom pool_geom(const Tensor& x, const Pool2dArgs& a, const char* op) {
  check_pool_input(x, op);
  const auto& k = a.kernel;
  const auto& s = a.stride;
  const auto& pd = a.padding;
  LB_CHECK(k[0] > 0 && k[1] > 0, op, ": kernel must be positive, got (", k[0], ", ", k[1], ")");
  LB_CHECK(s[0] > 0 && s[1] > 0, op, ": stride must be positive, got (", s[0], ", ", s[1], ")");
  // PyTorch's rule; it also guarantees that every window overlaps the input.
  LB_CHECK(pd[0] >= 0 && pd[1] >= 0 && 2 * pd[0] <= k[0] && 2 * pd[1] <= k[1], op,
           ": padding (", pd[0], ", ", pd[1], ") must be non-negative and at most half the kernel (",
           k[0], ", ", k[1], ")");
  const int64_t H = x.size(2), W = x.size(3);
  LB_CHECK(H + 2 * pd[0] >= k[0] && W + 2 * pd[1] >= k[1], op, ": kernel (", k[0], ", ", k[1],
           ") is larger than the padded input (", H + 2 * pd[0], ", ", W + 2 * pd[1], ") of x ",
           shape_str(x.shape()), " with padding (", pd[0], ", ", pd[1], ")");
  return PoolGeom{x.size(0) * x.size(1), H, W, k[0], k[1], s[0], s[1], pd[0], pd[1],
                  (H + 2 * pd[0] - k[0]) / s[0] + 1, (W + 2 * pd[1] - k[1]) / s[1] + 1};
}

// ---- max pool ----

// idx holds, per output, the window position i·kW + j (I = uint8_t) or the plane index
// ih·W + iw (I = int32_t) of the first maximum; NaN wins, as in PyTorch.
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

template <typename F>
void dispatch_index(DType d, F&& f) {
  if (d == DType::U8) f(uint8_t{});
  else f(int32_t{});
}

// ---- average pools ----
// One window per output: rows [h0, h1), columns [w0, w1) of the plane, averaged with
// divisor `div` (kH·kW for avg_pool2d with count_include_pad, the window size for the
// adaptive pool). The backward spreads dy / div over the same window.

struct AvgWindows {
  std::vector<int64_t> h0, h1, w0, w1;  // per output row / column
};

template <typename T, typename DivF>
void avg_forward(const PoolGeom& g, const AvgWindows& win, DivF divisor, const T* x, T* y) {
#pragma omp parallel for if (g.planes * g.H * g.W > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    const T* xp = x + pl * g.H * g.W;
    T* yp = y + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        T acc = 0;
        for (int64_t ih = win.h0[oh]; ih < win.h1[oh]; ++ih)
          for (int64_t iw = win.w0[ow]; iw < win.w1[ow]; ++iw) acc += xp[ih * g.W + iw];
        yp[oh * g.Wo + ow] = acc / static_cast<T>(divisor(oh, ow));
      }
  }
}

template <typename T, typename DivF>
void avg_backward(const PoolGeom& g, const AvgWindows& win, DivF divisor, const T* dy, T* dx) {
#pragma omp parallel for if (g.planes * g.H * g.W > kParallelMin) schedule(static)
  for (int64_t pl = 0; pl < g.planes; ++pl) {
    T* dxp = dx + pl * g.H * g.W;
    std::fill(dxp, dxp + g.H * g.W, T(0));
    const T* dyp = dy + pl * g.Ho * g.Wo;
    for (int64_t oh = 0; oh < g.Ho; ++oh)
      for (int64_t ow = 0; ow < g.Wo; ++ow) {
        const T v = dyp[oh * g.Wo + ow] / static_cast<T>(divisor(oh, ow));
        for (int64_t ih = win.h0[oh]; ih < win.h1[oh]; ++ih)
          for (int64_t iw = win.w0[ow]; iw < win.w1[ow]; ++iw) dxp[ih * g.W + iw] += v;
      }
  }
}

// Shared driver: forward, then record a backward that needs only the geometry.
template <typename DivF>
Tensor avg_pool_op(const Tensor& x, const PoolGeom& g, const AvgWindows& win, DivF divisor,
                   const char* name) {
  Tensor out = Tensor::empty({x.size(0), x.size(1), g.Ho, g.Wo}, x.dtype(), x.device());
  {
    const Tensor xc = contiguous_nograd(x);
    detail::dispatch_float(x.dtype(), name, [&](auto tag) {
      using T = decltype(tag);
      avg_forward<T>(g, win, divisor, xc.data<T>(), out.data<T>());
    });
  }
  if (should_record({x})) {
    const Shape xs = x.shape();
    record(name, out, {x}, {},
           [g, win, divisor, xs](const Tensor& dy, const std::vector<Tensor>&,
                                 const std::vector<bool>&) {
             Tensor dx = Tensor::empty(xs, dy.dtype(), dy.device());
             const Tensor dyc = contiguous_nograd(dy);
             detail::dispatch_float(dy.dtype(), "avg pool backward", [&](auto tag) {
               using T = decltype(tag);
               avg_backward<T>(g, win, divisor, dyc.data<T>(), dx.data<T>());
             });
             return std::vector<Tensor>{dx};
           });
  }
  return out;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dArgs& args) {
  const PoolGeom g = pool_geom(x, args, "max_pool2d");
  const Shape os = {x.size(0), x.size(1), g.Ho, g.Wo};
  Tensor out = Tensor::empty(os, x.dtype(), x.device());
  const DType idx_dtype = g.kH * g.kW <= 256 ? DType::U8 : DType::I32;
  Tensor idx = Tensor::empty(os, idx_dtype, x.device());
  {
    const Tensor xc = contiguous_nograd(x);
    detail::dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
      using T = decltype(tag);
      dispatch_index(idx_dtype, [&](auto itag) {
        using I = decltype(itag);
        max_pool_forward<T, I>(g, xc.data<T>(), out.data<T>(), static_cast<I*>(idx.raw_data()));
      });
    });
  }
  if (should_record({x})) {
    const Shape xs = x.shape();
    record("max_pool2d", out, {x}, {idx},
           [g, xs](const Tensor& dy, const std::vector<Tensor>& s, const std::vector<bool>&) {
             Tensor dx = Tensor::empty(xs, dy.dtype(), dy.device());
             const Tensor dyc = contiguous_nograd(dy);
             detail::dispatch_float(dy.dtype(), "max_pool2d backward", [&](auto tag) {
               using T = decltype(tag);
               dispatch_index(s[0].dtype(), [&](auto itag) {
                 using I = decltype(itag);
                 max_pool_backward<T, I>(g, dyc.data<T>(), static_cast<const I*>(s[0].raw_data()),
                                         dx.data<T>());
               });
             });
             return std::vector<Tensor>{dx};
           });
  }
  return out;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dArgs& args) {
  const PoolGeom g = pool_geom(x, args, "avg_pool2d");
  // With padding ≤ kernel/2 and floor output sizes, no window reaches past the padding, so
  // count_include_pad's divisor is always the full kernel area.
  AvgWindows win;
  for (int64_t oh = 0; oh < g.Ho; ++oh) {
    const int64_t h0 = oh * g.sh - g.ph;
    win.h0.push_back(std::max<int64_t>(0, h0));
    win.h1.push_back(std::min(g.H, h0 + g.kH));
  }
  for (int64_t ow = 0; ow < g.Wo; ++ow) {
    const int64_t w0 = ow * g.sw - g.pw;
    win.w0.push_back(std::max<int64_t>(0, w0));
    win.w1.push_back(std::min(g.W, w0 + g.kW));
  }
  const int64_t area = g.kH * g.kW;
  return avg_pool_op(x, g, win, [area](int64_t, int64_t) { return area; }, "avg_pool2d");
}

Tensor adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w) {
  check_pool_input(x, "adaptive_avg_pool2d");
  LB_CHECK(out_h > 0 && out_w > 0, "adaptive_avg_pool2d: output size must be positive, got (",
           out_h, ", ", out_w, ") for x ", shape_str(x.shape()));
  const int64_t H = x.size(2), W = x.size(3);
  LB_CHECK(H > 0 && W > 0, "adaptive_avg_pool2d: x ", shape_str(x.shape()),
           " has an empty plane");
  PoolGeom g{x.size(0) * x.size(1), H, W, 0, 0, 0, 0, 0, 0, out_h, out_w};
  // PyTorch's windows: start = floor(i·H/out), end = ceil((i+1)·H/out); they may overlap.
  AvgWindows win;
  for (int64_t i = 0; i < out_h; ++i) {
    win.h0.push_back(i * H / out_h);
    win.h1.push_back(((i + 1) * H + out_h - 1) / out_h);
  }
  for (int64_t j = 0; j < out_w; ++j) {
    win.w0.push_back(j * W / out_w);
    win.w1.push_back(((j + 1) * W + out_w - 1) / out_w);
  }
  const AvgWindows& w = win;
  std::vector<int64_t> hs(out_h), ws(out_w);
  for (int64_t i = 0; i < out_h; ++i) hs[i] = w.h1[i] - w.h0[i];
  for (int64_t j = 0; j < out_w; ++j) ws[j] = w.w1[j] - w.w0[j];
  return avg_pool_op(x, g, win, [hs, ws](int64_t oh, int64_t ow) { return hs[oh] * ws[ow]; },
                     "adaptive_avg_pool2d");
}

}  // namespace lb
