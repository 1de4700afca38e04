// layer_norm over the last dim C of x viewed as (R, C) rows (R = B*T for (B, T, C)), forward
// and backward. As PyTorch, the forward saves x plus one mean and one rstd per row (2R
// values), never x̂ or y; backward recomputes x̂ row by row. Rows are split across OpenMP
// threads; each row is read once and stays in L1 for its passes.
#include <cmath>
#include <vector>

#include <omp.h>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"

namespace lb {

namespace {
using detail::contiguous_nograd;

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

void check_param(const Tensor& p, const Tensor& x, int64_t C, const char* name) {
  if (!p.defined()) return;
  detail::check_cpu(p, "layer_norm");
  LB_CHECK(p.dim() == 1 && p.size(0) == C, "layer_norm: ", name, " must have shape ",
           shape_str({C}), " to match the last dim of x ", shape_str(x.shape()), ", got ",
           shape_str(p.shape()));
  LB_CHECK(p.dtype() == x.dtype(), "layer_norm: ", name, " is ", dtype_name(p.dtype()),
           " but x is ", dtype_name(x.dtype()));
}
}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_defined(x, "layer_norm", "x");
  detail::check_cpu(x, "layer_norm");
  detail::check_floating(x, "layer_norm");
  LB_CHECK(x.dim() >= 1 && x.size(-1) > 0, "layer_norm: x must have a non-empty last dim, got ",
           shape_str(x.shape()));
  LB_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got ", eps);
  const int64_t C = x.size(-1);
  const int64_t R = x.numel() / C;
  check_param(weight, x, C, "weight");
  check_param(bias, x, C, "bias");
  const Tensor xc = contiguous_nograd(x);
  const Tensor wc = weight.defined() ? contiguous_nograd(weight) : Tensor();
  const Tensor bc = bias.defined() ? contiguous_nograd(bias) : Tensor();
  const bool rec = autograd::should_record({x, weight, bias});
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, rstd;
  if (rec) {
    mean = Tensor::empty({R}, x.dtype(), x.device());
    rstd = Tensor::empty({R}, x.dtype(), x.device());
  }
  detail::dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward<T>(xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr,
                          bc.defined() ? bc.data<T>() : nullptr, y.data<T>(),
                          rec ? mean.data<T>() : nullptr, rec ? rstd.data<T>() : nullptr, R, C,
                          eps);
  });
  if (rec) {
    // Saved: x (as given: a view keeps its storage, backward makes it contiguous), weight
    // (a parameter, not counted as activation memory), mean and rstd (R values each).
    autograd::record(
        "layer_norm", y, {x, weight, bias}, {x, weight, mean, rstd},
        [R, C](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          const Tensor gc = contiguous_nograd(g);
          const Tensor xs = contiguous_nograd(s[0]);
          const Tensor ws = s[1].defined() ? contiguous_nograd(s[1]) : Tensor();
          Tensor dx, dw, db;
          if (need[0]) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
          if (need[1]) dw = Tensor::empty({C}, xs.dtype(), xs.device());
          if (need[2]) db = Tensor::empty({C}, xs.dtype(), xs.device());
          detail::dispatch_float(xs.dtype(), "layer_norm backward", [&](auto tag) {
            using T = decltype(tag);
            layer_norm_backward<T>(gc.data<T>(), xs.data<T>(),
                                   ws.defined() ? ws.data<T>() : nullptr, s[2].data<T>(),
                                   s[3].data<T>(), dx.defined() ? dx.data<T>() : nullptr,
                                   dw.defined() ? dw.data<T>() : nullptr,
                                   db.defined() ? db.data<T>() : nullptr, R, C);
          });
          return std::vector<Tensor>{dx, dw, db};
        });
  }
  return y;
}

}  // namespace lb
