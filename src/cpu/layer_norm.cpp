// CPU layer-norm kernels (src/backend/layer_norm.h). Rows are split across OpenMP threads;
// each row is read once and stays in L1 for its passes.
#include <cmath>
#include <vector>

#include <omp.h>

#include "lb/core/dispatch.h"
#include "src/backend/layer_norm.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 14;  // elements

// y = (x - mean) * rstd * w + b per row; w, b may be null. mean/rstd (R) may be null (not
// recording). Variance by two passes over the cached row (no cancellation), biased (/C).
template <typename T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean_out, T* rstd_out,
                        int64_t R, int64_t C, double eps) {
  const T inv_c = T(1) / static_cast<T>(C);
#pragma omp parallel for if (R * C > kParallelMin) schedule(static)
  for (int64_t r = 0; r < R; ++r) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < C; ++j) s += xr[j];
    const T mu = s * inv_c;
    T v = 0;
#pragma omp simd reduction(+ : v)
    for (int64_t j = 0; j < C; ++j) v += (xr[j] - mu) * (xr[j] - mu);
    const T rs = static_cast<T>(1.0 / std::sqrt(static_cast<double>(v * inv_c) + eps));
    if (w && b) {
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs * w[j] + b[j];
    } else if (w) {
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs * w[j];
    } else if (b) {
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs + b[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - mu) * rs;
    }
    if (mean_out) {
      mean_out[r] = mu;
      rstd_out[r] = rs;
    }
  }
}

// With x̂ = (x - mean) rstd and y = x̂ w + b (per row, C entries):
//   dw = Σ_rows g x̂,  db = Σ_rows g,  dx̂ = g w,
//   dx = rstd (dx̂ - mean_j(dx̂) - x̂ mean_j(dx̂ x̂))   (d/dx of the row's mean and rstd).
// dx / dw / db may be null when not needed. dw and db are summed per thread over its rows,
// then across threads (static schedule: deterministic for a given thread count).
template <typename T>
void layer_norm_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd,
                         T* dx, T* dw, T* db, int64_t R, int64_t C) {
  const T inv_c = T(1) / static_cast<T>(C);
  const bool par = R * C > kParallelMin;
  const int nt = par ? omp_get_max_threads() : 1;
  const bool want_wb = dw || db;
  std::vector<T> partial(want_wb ? static_cast<size_t>(nt) * 2 * C : 0, T(0));
#pragma omp parallel num_threads(nt) if (par)
  {
    T* pdw = want_wb ? partial.data() + static_cast<size_t>(omp_get_thread_num()) * 2 * C : nullptr;
    T* pdb = want_wb ? pdw + C : nullptr;
#pragma omp for schedule(static)
    for (int64_t r = 0; r < R; ++r) {
      const T* gr = g + r * C;
      const T* xr = x + r * C;
      const T mu = mean[r], rs = rstd[r];
      if (want_wb) {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) {
          pdw[j] += gr[j] * ((xr[j] - mu) * rs);
          pdb[j] += gr[j];
        }
      }
      if (!dx) continue;
      T a = 0, c = 0;  // Σ dx̂, Σ dx̂ x̂
      if (w) {
#pragma omp simd reduction(+ : a, c)
        for (int64_t j = 0; j < C; ++j) {
          const T d = gr[j] * w[j];
          a += d;
          c += d * ((xr[j] - mu) * rs);
        }
      } else {
#pragma omp simd reduction(+ : a, c)
        for (int64_t j = 0; j < C; ++j) {
          a += gr[j];
          c += gr[j] * ((xr[j] - mu) * rs);
        }
      }
      a *= inv_c;
      c *= inv_c;
      T* dr = dx + r * C;
      if (w) {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) dr[j] = rs * (gr[j] * w[j] - a - (xr[j] - mu) * rs * c);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < C; ++j) dr[j] = rs * (gr[j] - a - (xr[j] - mu) * rs * c);
      }
    }
  }
  if (want_wb) {
    for (int64_t j = 0; j < C; ++j) {
      T sw = 0, sb = 0;
      for (int t = 0; t < nt; ++t) {
        sw += partial[static_cast<size_t>(t) * 2 * C + j];
        sb += partial[static_cast<size_t>(t) * 2 * C + C + j];
      }
      if (dw) dw[j] = sw;
      if (db) db[j] = sb;
    }
  }
}

void forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, Tensor& mean, Tensor& rstd, double eps) {
  const int64_t C = x.size(-1), R = x.numel() / C;
  detail::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward<T>(x.data<T>(), data_or_null<T>(w), data_or_null<T>(b), y.data<T>(), data_or_null<T>(mean), data_or_null<T>(rstd), R, C, eps);
  });
}

void backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd, Tensor& dx,
              Tensor& dw, Tensor& db) {
  const int64_t C = x.size(-1), R = x.numel() / C;
  detail::dispatch_float(x.dtype(), "layer_norm backward", [&](auto tag) {
    using T = decltype(tag);
    layer_norm_backward<T>(g.data<T>(), x.data<T>(), data_or_null<T>(w), mean.data<T>(), rstd.data<T>(), data_or_null<T>(dx),
                           data_or_null<T>(dw), data_or_null<T>(db), R, C);
  });
}

}  // namespace

const LayerNormKernels kCpuLayerNorm{forward, backward};

}  // namespace lb::backend
