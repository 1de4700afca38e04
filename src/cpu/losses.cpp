// CPU loss kernels (src/backend/losses.h).
#include <cmath>
#include <limits>

#include "lb/core/dispatch.h"
#include "src/backend/losses.h"
#include "src/backend/fast_exp.h"

namespace lb::backend {
namespace {
using detail::fast_exp;

constexpr int64_t kParallelMin = 1 << 14;  // elements

// Forward: lse per row (written to `lse`) and Σ of the per-row losses over valid rows.
template <typename T>
double cross_entropy_forward(const T* x, const int64_t* tgt, int64_t N, int64_t C,
                             int64_t ignore_index, double eps, T* lse) {
  double total = 0;
#pragma omp parallel for if (N * C > kParallelMin) schedule(static) reduction(+ : total)
  for (int64_t i = 0; i < N; ++i) {
    const T* xr = x + i * C;
    T mx = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < C; ++j) {
      const T v = xr[j];
      mx = v > mx ? v : mx;  // by value: std::max's reference result defeats vectorization
    }
    T s = 0, sx = 0;
#pragma omp simd reduction(+ : s, sx)
    for (int64_t j = 0; j < C; ++j) {
      s += fast_exp(xr[j] - mx);
      sx += xr[j];
    }
    const double l = static_cast<double>(mx) + std::log(static_cast<double>(s));
    lse[i] = static_cast<T>(l);
    if (tgt[i] == ignore_index) continue;
    total += (1.0 - eps) * (l - static_cast<double>(xr[tgt[i]])) +
             eps * (l - static_cast<double>(sx) / static_cast<double>(C));
  }
  return total;
}

template <typename T>
void cross_entropy_backward(const T* x, const int64_t* tgt, const T* lse, int64_t N, int64_t C,
                            int64_t ignore_index, double eps, T coef, T* dx) {
  const T uniform = static_cast<T>(eps / static_cast<double>(C));
  const T hit = static_cast<T>(1.0 - eps);
#pragma omp parallel for if (N * C > kParallelMin) schedule(static)
  for (int64_t i = 0; i < N; ++i) {
    T* dr = dx + i * C;
    if (tgt[i] == ignore_index) {
      for (int64_t j = 0; j < C; ++j) dr[j] = 0;
      continue;
    }
    const T* xr = x + i * C;
    const T l = lse[i];
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) dr[j] = coef * (fast_exp(xr[j] - l) - uniform);
    dr[tgt[i]] -= coef * hit;
  }
}
double ce_forward(const Tensor& x, const Tensor& targets, int64_t ignore_index, double eps, Tensor& lse) {
  const int64_t N = x.size(0), C = x.size(1);
  double total = 0;
  detail::dispatch_float(x.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    total = cross_entropy_forward<T>(x.data<T>(), targets.data<int64_t>(), N, C, ignore_index, eps, lse.data<T>());
  });
  return total;
}

void ce_backward(const Tensor& x, const Tensor& targets, const Tensor& lse, int64_t ignore_index, double eps,
                 double coef, Tensor& dx) {
  const int64_t N = x.size(0), C = x.size(1);
  detail::dispatch_float(x.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    cross_entropy_backward<T>(x.data<T>(), targets.data<int64_t>(), lse.data<T>(), N, C, ignore_index, eps,
                              static_cast<T>(coef), dx.data<T>());
  });
}

double squared_error_sum(const Tensor& ac, const Tensor& bc) {
  const int64_t n = ac.numel();
  double total = 0;
  detail::dispatch_float(ac.dtype(), "mse_loss", [&](auto tag) {
    using T = decltype(tag);
    const T* a = ac.data<T>();
    const T* b = bc.data<T>();
#pragma omp parallel for if (n > kParallelMin) schedule(static) reduction(+ : total)
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
      total += d * d;
    }
  });
  return total;
}

void squared_error_grad(const Tensor& a, const Tensor& b, double coef, Tensor& da, Tensor& db) {
  const int64_t n = a.numel();
  detail::dispatch_float(a.dtype(), "mse_loss backward", [&](auto tag) {
    using T = decltype(tag);
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* d = da.data<T>();
    const T k = static_cast<T>(coef);
#pragma omp parallel for if (n > kParallelMin) schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = k * (ap[i] - bp[i]);
    if (db.defined()) {
      T* e = db.data<T>();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
      for (int64_t i = 0; i < n; ++i) e[i] = -d[i];
    }
  });
}

}  // namespace

const LossKernels kCpuLosses{ce_forward, ce_backward, squared_error_sum, squared_error_grad};

}  // namespace lb::backend
