// CPU softmax / log_softmax kernels (src/backend/softmax.h). The rows are contiguous (the
// axis last): z = x + mask is written into the output row while tracking the max, then exp
// and normalise in place, so each row is read once from memory and stays in L1 for the
// other passes.
#include <cmath>
#include <limits>

#include "lb/core/dispatch.h"
#include "src/backend/softmax.h"
#include "src/backend/fast_exp.h"
#include "src/cpu/softmax_row.h"

namespace lb::backend {
namespace {
using detail::fast_exp;

constexpr int64_t kParallelMin = 1 << 14;  // elements; below this one thread is faster

// Element offset of the mask at the start of row `r` of a tensor of shape `shape` (rows =
// all axes but the last), for mask strides `ms` broadcast to `shape`.
int64_t mask_row_offset(int64_t r, const Shape& shape, const Shape& ms) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) {
    off += (r % shape[d]) * ms[d];
    r /= shape[d];
  }
  return off;
}

// Forward over `rows` contiguous rows of length L; `m` (may be null) is the mask with row
// offsets from mask_row_offset and stride `msl` along the row.
template <typename T, bool kLog>
void softmax_rows(const T* x, const T* m, const Shape& shape, const Shape& ms, T* y,
                  int64_t rows, int64_t L) {
  const int64_t msl = ms.empty() ? 0 : ms.back();
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
#pragma omp parallel for if (rows * L > kParallelMin) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * L;
    T* yr = y + r * L;
    // Pass 1: z = x + mask into y, and the row max.
    const T mx = cpu::masked_row_max(xr, m == nullptr ? nullptr : m + mask_row_offset(r, shape, ms), msl, L, yr);
    if (mx == kNegInf) {  // fully masked row (see the file comment)
      for (int64_t j = 0; j < L; ++j) yr[j] = kLog ? kNegInf : T(0);
      continue;
    }
    // Pass 2: exponentials and their sum; pass 3: normalise.
    if constexpr (kLog) {
      T s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < L; ++j) s += fast_exp(yr[j] - mx);
      const T lse = mx + std::log(s);
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) yr[j] -= lse;
    } else {
      cpu::exp_normalize_row(yr, L, mx);
    }
  }
}

// Backward over contiguous rows, from the saved output y:
//   softmax:     y = e^z / Σe^z  =>  dz_j = y_j (g_j - Σ_k g_k y_k)
//   log_softmax: y = z - lse     =>  dz_j = g_j - e^{y_j} Σ_k g_k
template <typename T, bool kLog>
void softmax_backward_rows(const T* g, const T* y, T* dz, int64_t rows, int64_t L) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
#pragma omp parallel for if (rows * L > kParallelMin) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gr = g + r * L;
    const T* yr = y + r * L;
    T* dr = dz + r * L;
    T s = 0;
    if constexpr (kLog) {
      if (L > 0 && yr[0] == kNegInf) {  // maybe a fully masked row: its gradient is 0
        int64_t j = 0;
        while (j < L && yr[j] == kNegInf) ++j;
        if (j == L) {
          for (int64_t k = 0; k < L; ++k) dr[k] = 0;
          continue;
        }
      }
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < L; ++j) s += gr[j];
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) dr[j] = gr[j] - fast_exp(yr[j]) * s;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < L; ++j) s += gr[j] * yr[j];
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) dr[j] = yr[j] * (gr[j] - s);
    }
  }
}

void forward(const Tensor& x, const Tensor& mask, const Shape& ms, Tensor& y, bool log) {
  const Shape& shape = x.shape();
  const int64_t L = shape.back();
  const int64_t rows = L == 0 ? 0 : x.numel() / L;
  detail::dispatch_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* m = mask.defined() ? static_cast<const T*>(mask.raw_data()) : nullptr;
    if (log)
      softmax_rows<T, true>(x.data<T>(), m, shape, ms, y.data<T>(), rows, L);
    else
      softmax_rows<T, false>(x.data<T>(), m, shape, ms, y.data<T>(), rows, L);
  });
}

void backward(const Tensor& g, const Tensor& y, Tensor& dz, bool log) {
  const int64_t L = g.shape().back();
  const int64_t rows = L == 0 ? 0 : g.numel() / L;
  detail::dispatch_float(g.dtype(), "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    if (log)
      softmax_backward_rows<T, true>(g.data<T>(), y.data<T>(), dz.data<T>(), rows, L);
    else
      softmax_backward_rows<T, false>(g.data<T>(), y.data<T>(), dz.data<T>(), rows, L);
  });
}

}  // namespace

const SoftmaxKernels kCpuSoftmax{forward, backward};

}  // namespace lb::backend
