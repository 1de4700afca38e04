// Internal: the optimizers' per-element updates (LB_HD formulas shared by the CPU loops and
// the CUDA kernels) and the optimizer kernels of one device (see backend.h). Tensors are
// contiguous, of one dtype (f32 or f64) and on one device; updates are in place.
#pragma once
#include <cmath>

#include "lb/core/host_device.h"
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

// Adam / AdamW (torch.optim): d = g + l2·w; m = β1 m + (1-β1) d; v = β2 v + (1-β2) d²;
// w = w·decay - step_size · m / (sqrt(v)·inv_sqrt_bc2 + eps).
template <typename T>
struct AdamCoefs {
  T b1, b2, eps, step_size, inv_sqrt_bc2, decay, l2;
};

template <typename T>
LB_HD inline void adam_update(T& w, T g, T& m, T& v, const AdamCoefs<T>& c) {
#if defined(__CUDA_ARCH__)
  using ::sqrt;
#else
  using std::sqrt;
#endif
  const T d = g + c.l2 * w;
  m = c.b1 * m + (1 - c.b1) * d;
  v = c.b2 * v + (1 - c.b2) * d * d;
  w = w * c.decay - c.step_size * m / (sqrt(v) * c.inv_sqrt_bc2 + c.eps);
}

// SGD (torch.optim.SGD): d = g + wd·w; with momentum buf = d (first step) or μ buf + damp·d,
// d = nesterov ? d + μ buf : buf; w -= lr·d.
template <typename T>
struct SgdCoefs {
  T lr, wd, mu, damp;
  bool momentum, first, nesterov;
};

template <typename T>
LB_HD inline void sgd_update(T& w, T g, T* buf, const SgdCoefs<T>& c) {
  T d = g + c.wd * w;
  if (c.momentum) {
    *buf = c.first ? d : c.mu * *buf + c.damp * d;
    d = c.nesterov ? d + c.mu * *buf : *buf;
  }
  w -= c.lr * d;
}

struct OptimKernels {
  void (*adam_f32)(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamCoefs<float>& c);
  void (*adam_f64)(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamCoefs<double>& c);
  // The same update with a row-sparse gradient of a (V, D) parameter: rows (K,) i64 distinct,
  // values (K, D); every other row's gradient is zero (and still moves its moments and weight,
  // as a dense zero would). nullptr where the device has none.
  void (*adam_rows_f32)(Tensor& w, const Tensor& rows, const Tensor& values, Tensor& m, Tensor& v,
                        const AdamCoefs<float>& c);
  void (*adam_rows_f64)(Tensor& w, const Tensor& rows, const Tensor& values, Tensor& m, Tensor& v,
                        const AdamCoefs<double>& c);
  // buf: the momentum buffer, undefined without momentum
  void (*sgd_f32)(Tensor& w, const Tensor& g, Tensor& buf, const SgdCoefs<float>& c);
  void (*sgd_f64)(Tensor& w, const Tensor& g, Tensor& buf, const SgdCoefs<double>& c);
  // Σ g² accumulated in double (gradient clipping), returned to the host
  double (*sum_squares)(const Tensor& g);
  // g = T(g · coef), computed in double
  void (*scale_in_double)(Tensor& g, double coef);
};

// src/cpu/optim.cpp, cuda/optim.cu
LB_KERNEL_TABLES(OptimKernels, optim_kernels, kCpuOptim, kCudaOptim, "optimizer updates")

}  // namespace lb::backend
