// softmax / log_softmax along one axis with an optional additive mask, forward and backward.
// The kernel works on contiguous rows (the axis last): z = x + mask is written into the
// output row while tracking the max, then exp and normalise in place, so each row is read
// once from memory and stays in L1 for the other passes. Another axis is moved last by a
// transposed view (a copy; attention never needs it).
//
// Masked rows: entries with mask = -inf get probability exactly 0 (no NaN) as long as one
// entry of the row is finite. A row with every entry -inf (a fully padded query) gives
// softmax 0 everywhere and log_softmax -inf everywhere, both with zero gradient — PyTorch
// gives NaN there; zeros keep a training run alive (FlashAttention does the same).
#include <cmath>
#include <limits>

#include "fast_exp.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/nn.h"
#include "lb/ops/reduce.h"

namespace lb {

namespace {
using detail::contiguous_nograd;
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
    T mx = kNegInf;
    if (m == nullptr) {
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < L; ++j) {
        const T z = xr[j];
        yr[j] = z;
        mx = z > mx ? z : mx;  // by value: std::max's reference result defeats vectorization
      }
    } else {
      const T* mr = m + mask_row_offset(r, shape, ms);
      if (msl == 1) {
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < L; ++j) {
          const T z = xr[j] + mr[j];
          yr[j] = z;
          mx = z > mx ? z : mx;
        }
      } else {
#pragma omp simd reduction(max : mx)
        for (int64_t j = 0; j < L; ++j) {
          const T z = xr[j] + mr[j * msl];
          yr[j] = z;
          mx = z > mx ? z : mx;
        }
      }
    }
    // The simd max reduction starts each lane at an implementation-defined "least value":
    // -inf under GCC, lowest() under clang. A row of -inf only must read as fully masked.
    if (!(mx > std::numeric_limits<T>::lowest())) mx = kNegInf;
    if (mx == kNegInf) {  // fully masked row (see the file comment)
      for (int64_t j = 0; j < L; ++j) yr[j] = kLog ? kNegInf : T(0);
      continue;
    }
    // Pass 2: exponentials and their sum; pass 3: normalise.
    T s = 0;
    if constexpr (kLog) {
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < L; ++j) s += fast_exp(yr[j] - mx);
      const T lse = mx + std::log(s);
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) yr[j] -= lse;
    } else {
#pragma omp simd reduction(+ : s)
      for (int64_t j = 0; j < L; ++j) {
        const T e = fast_exp(yr[j] - mx);
        yr[j] = e;
        s += e;
      }
      const T inv = T(1) / s;
#pragma omp simd
      for (int64_t j = 0; j < L; ++j) yr[j] *= inv;
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

template <bool kLog>
Tensor softmax_impl(const Tensor& x, int64_t dim, const Tensor& mask) {
  const char* op = kLog ? "log_softmax" : "softmax";
  detail::check_defined(x, op, "x");
  detail::check_cpu(x, op);
  detail::check_floating(x, op);
  LB_CHECK(x.dim() >= 1, op, ": needs at least 1 dimension, got a 0-d tensor ", x.str());
  dim = normalize_dim(dim, x.dim());
  if (mask.defined()) {
    detail::check_cpu(mask, op);
    LB_CHECK(mask.dtype() == x.dtype(), op, ": the additive mask must have x's dtype ",
             dtype_name(x.dtype()), ", got ", dtype_name(mask.dtype()), " ",
             shape_str(mask.shape()),
             ". HINT: build it as (1 - keep) * -1e4 (or -inf) in x's dtype, not as a bool tensor");
    bool fits = mask.dim() <= x.dim();
    for (int64_t i = 1; fits && i <= mask.dim(); ++i)
      fits = mask.size(-i) == 1 || mask.size(-i) == x.size(-i);
    LB_CHECK(fits, op, ": mask ", shape_str(mask.shape()), " does not broadcast to x ",
             shape_str(x.shape()), ". HINT: a key-padding mask for (B, H, T, T) scores is (B, 1, 1, T)");
  }
  if (dim != x.dim() - 1) {
    // Move the axis last (views, differentiable), run, move it back into a contiguous result.
    const Tensor xt = x.transpose(dim, -1);
    const Tensor mt = mask.defined() ? mask.expand(x.shape()).transpose(dim, -1) : Tensor();
    return softmax_impl<kLog>(xt, -1, mt).transpose(dim, -1).contiguous();
  }

  const Tensor xc = contiguous_nograd(x);
  const Shape& shape = x.shape();
  const int64_t L = shape.back();
  const int64_t rows = L == 0 ? 0 : x.numel() / L;
  const Shape ms = mask.defined() ? detail::broadcast_strides(mask, shape) : Shape();
  Tensor y = Tensor::empty(shape, x.dtype(), x.device());
  detail::dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* m = mask.defined() ? static_cast<const T*>(mask.raw_data()) : nullptr;
    softmax_rows<T, kLog>(xc.data<T>(), m, shape, ms, y.data<T>(), rows, L);
  });

  if (autograd::should_record({x, mask})) {
    const Shape mask_shape = mask.defined() ? mask.shape() : Shape();
    // Only the output is saved: both gradients are functions of y and g.
    autograd::record(op, y, {x, mask}, {y.detach()},
                     [mask_shape, rows, L](const Tensor& g, const std::vector<Tensor>& s,
                                           const std::vector<bool>& need) {
                       const Tensor gc = contiguous_nograd(g);
                       Tensor dz = Tensor::empty(gc.shape(), gc.dtype(), gc.device());
                       detail::dispatch_float(gc.dtype(), "softmax backward", [&](auto tag) {
                         using T = decltype(tag);
                         softmax_backward_rows<T, kLog>(gc.data<T>(), s[0].data<T>(),
                                                        dz.data<T>(), rows, L);
                       });
                       // The mask enters as x + mask, so its gradient is dz summed over
                       // its broadcast axes.
                       return std::vector<Tensor>{need[0] ? dz : Tensor(),
                                                  need[1] ? sum_to(dz, mask_shape) : Tensor()};
                     });
  }
  return y;
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, const Tensor& mask) {
  return softmax_impl<false>(x, dim, mask);
}

Tensor log_softmax(const Tensor& x, int64_t dim, const Tensor& mask) {
  return softmax_impl<true>(x, dim, mask);
}

}  // namespace lb
