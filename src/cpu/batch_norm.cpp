// CPU batch-norm kernels (src/backend/batch_norm.h): channels split across OpenMP threads;
// a channel's data are N contiguous blocks of S values, each summed in T, the blocks in double.
#include "lb/core/dispatch.h"
#include "src/backend/batch_norm.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 1 << 14;  // elements

// Σ over the M values of channel c of f(v) (x is (N, C, S)); accumulated in double.
template <typename T, typename F>
double channel_sum(const T* x, int64_t N, int64_t C, int64_t S, int64_t c, F f) {
  double acc = 0;
  for (int64_t n = 0; n < N; ++n) {
    const T* p = x + (n * C + c) * S;
    T part = 0;
#pragma omp simd reduction(+ : part)
    for (int64_t s = 0; s < S; ++s) part += f(p[s]);
    acc += part;
  }
  return acc;
}

// Two passes (x is cached per channel only when small, but the second pass is cheap next to
// the GEMMs around it).
template <typename T>
void batch_stats(const T* x, int64_t N, int64_t C, int64_t S, T* mean, double* var) {
  const double inv_m = 1.0 / static_cast<double>(N * S);
#pragma omp parallel for if (N * C * S > kParallelMin) schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const double mu = channel_sum(x, N, C, S, c, [](T v) { return v; }) * inv_m;
    const T mt = static_cast<T>(mu);
    var[c] = channel_sum(x, N, C, S, c, [mt](T v) { return (v - mt) * (v - mt); }) * inv_m;
    mean[c] = mt;
  }
}

template <typename T>
void batch_norm_apply(const T* x, const T* scale, const T* shift, T* y, int64_t N, int64_t C, int64_t S) {
#pragma omp parallel for collapse(2) if (N * C * S > kParallelMin) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      const T* p = x + (n * C + c) * S;
      T* q = y + (n * C + c) * S;
      const T a = scale[c], b = shift[c];
#pragma omp simd
      for (int64_t s = 0; s < S; ++s) q[s] = p[s] * a + b;
    }
}

template <typename T>
void batch_norm_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd, bool training, T* dx,
                         T* dw, T* db, int64_t N, int64_t C, int64_t S) {
  const double inv_m = 1.0 / static_cast<double>(N * S);
#pragma omp parallel for if (N * C * S > kParallelMin) schedule(static)
  for (int64_t c = 0; c < C; ++c) {
    const T mu = mean[c], rs = rstd[c];
    double sg = 0, sgx = 0;
    for (int64_t n = 0; n < N; ++n) {
      const T* gp = g + (n * C + c) * S;
      const T* xp = x + (n * C + c) * S;
      T a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
      for (int64_t s = 0; s < S; ++s) {
        a += gp[s];
        b += gp[s] * ((xp[s] - mu) * rs);
      }
      sg += a;
      sgx += b;
    }
    if (dw) dw[c] = static_cast<T>(sgx);
    if (db) db[c] = static_cast<T>(sg);
    if (!dx) continue;
    const T k = (w ? w[c] : T(1)) * rs;
    const T mg = static_cast<T>(training ? sg * inv_m : 0.0);
    const T mgx = static_cast<T>(training ? sgx * inv_m : 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const T* gp = g + (n * C + c) * S;
      const T* xp = x + (n * C + c) * S;
      T* dp = dx + (n * C + c) * S;
#pragma omp simd
      for (int64_t s = 0; s < S; ++s) dp[s] = k * (gp[s] - mg - (xp[s] - mu) * rs * mgx);
    }
  }
}

void stats(const Tensor& x, int64_t N, int64_t C, int64_t S, Tensor& mean, Tensor& var) {
  detail::dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    batch_stats<T>(x.data<T>(), N, C, S, mean.data<T>(), var.data<double>());
  });
}

void apply(const Tensor& x, const Tensor& scale, const Tensor& shift, Tensor& y, int64_t N, int64_t C, int64_t S) {
  detail::dispatch_float(x.dtype(), "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_apply<T>(x.data<T>(), scale.data<T>(), shift.data<T>(), y.data<T>(), N, C, S);
  });
}

void backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& mean, const Tensor& rstd,
              bool training, Tensor& dx, Tensor& dw, Tensor& db, int64_t N, int64_t C, int64_t S) {
  detail::dispatch_float(x.dtype(), "batch_norm backward", [&](auto tag) {
    using T = decltype(tag);
    batch_norm_backward<T>(g.data<T>(), x.data<T>(), data_or_null<T>(w), mean.data<T>(), rstd.data<T>(), training,
                           data_or_null<T>(dx), data_or_null<T>(dw), data_or_null<T>(db), N, C, S);
  });
}

}  // namespace

const BatchNormKernels kCpuBatchNorm{stats, apply, backward};

}  // namespace lb::backend
