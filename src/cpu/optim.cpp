// CPU optimizer kernels (src/backend/optim.h): the shared per-element formulas in OpenMP
// loops over the flat parameter.
#include "src/backend/optim.h"

#include <vector>

#include "lb/core/dispatch.h"
#include "src/backend/row_slots.h"

namespace lb::backend {
namespace {

constexpr int64_t kParallelMin = 65536;

template <typename T>
void adam(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamCoefs<T>& coefs) {
  const AdamCoefs<T> c = coefs;  // a local: the stores through w, m, v cannot alias it
  T* pw = w.data<T>();
  const T* pg = g.data<T>();
  T* pm = m.data<T>();
  T* pv = v.data<T>();
  const int64_t n = w.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) adam_update(pw[i], pg[i], pm[i], pv[i], c);
}

// Row r's gradient: its row of values where r is one of rows, else zeros; the per-element
// formula is adam()'s, so each element gets what the dense gradient would give it, bit for bit.
template <typename T>
void adam_rows(Tensor& w, const Tensor& rows, const Tensor& values, Tensor& m, Tensor& v, const AdamCoefs<T>& coefs) {
  const AdamCoefs<T> c = coefs;
  const int64_t V = w.size(0), D = w.numel() / V;
  const std::vector<int64_t> slot = row_slots(rows, V);
  const std::vector<T> zeros(static_cast<size_t>(D), T(0));
  T* pw = w.data<T>();
  const T* pg = values.data<T>();
  T* pm = m.data<T>();
  T* pv = v.data<T>();
#pragma omp parallel for if (V * D > kParallelMin) schedule(static)
  for (int64_t i = 0; i < V; ++i) {
    const T* g = slot[i] >= 0 ? pg + slot[i] * D : zeros.data();
    const int64_t at = i * D;
    for (int64_t j = 0; j < D; ++j) adam_update(pw[at + j], g[j], pm[at + j], pv[at + j], c);
  }
}

template <typename T>
void sgd(Tensor& w, const Tensor& g, Tensor& buf, const SgdCoefs<T>& coefs) {
  const SgdCoefs<T> c = coefs;
  T* pw = w.data<T>();
  const T* pg = g.data<T>();
  T* pb = c.momentum ? buf.data<T>() : nullptr;
  const int64_t n = w.numel();
#pragma omp parallel for if (n > kParallelMin) schedule(static)
  for (int64_t i = 0; i < n; ++i) sgd_update(pw[i], pg[i], pb ? pb + i : nullptr, c);
}

double sum_squares(const Tensor& g) {
  double sq = 0;
  detail::dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* d = g.data<T>();
    double s = 0;
    const int64_t n = g.numel();
#pragma omp parallel for reduction(+ : s) if (n > kParallelMin)
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(d[i]) * d[i];
    sq = s;
  });
  return sq;
}

void scale_in_double(Tensor& g, double coef) {
  detail::dispatch_float(g.dtype(), "clip_grad_norm", [&](auto tag) {
    using T = decltype(tag);
    T* d = g.data<T>();
    const int64_t n = g.numel();
    for (int64_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] * coef);
  });
}

}  // namespace

const OptimKernels kCpuOptim{adam<float>, adam<double>, adam_rows<float>, adam_rows<double>, sgd<float>, sgd<double>, sum_squares, scale_in_double};

}  // namespace lb::backend
