// batch_norm over x (N, C, S...) per channel C, forward and backward, as
// torch.nn.functional.batch_norm. Training: batch mean and biased variance over the M = N*S
// values of a channel normalise x; running_mean/var are updated in place as
//   running = (1 - momentum) running + momentum stat   (variance unbiased: * M / (M - 1)).
// Eval: the running statistics normalise x. Saved for backward: x, weight, and one mean and
// one rstd per channel (2C values) — never x̂. Channels are split across OpenMP threads; a
// channel's data are N contiguous blocks of S values.
#include <cmath>
#include <vector>

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"

namespace lb {

namespace {
using detail::contiguous_nograd;

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

// Training statistics per channel: mean and biased variance (two passes; x is cached per
// channel only when small, but the second pass is cheap next to the GEMMs around it).
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

// y = x * scale[c] + shift[c] with scale = w rstd, shift = b - mean w rstd.
template <typename T>
void batch_norm_apply(const T* x, const T* scale, const T* shift, T* y, int64_t N, int64_t C,
                      int64_t S) {
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

// With x̂ = (x - mean) rstd, y = x̂ w + b, per channel over its M values:
//   dw = Σ g x̂, db = Σ g;
//   training (mean, rstd depend on x): dx = w rstd (g - db/M - x̂ dw/M);
//   eval (constants):                   dx = w rstd g.
template <typename T>
void batch_norm_backward(const T* g, const T* x, const T* w, const T* mean, const T* rstd,
                         bool training, T* dx, T* dw, T* db, int64_t N, int64_t C, int64_t S) {
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

void check_channel_vec(const Tensor& t, const Tensor& x, int64_t C, const char* name,
                       bool same_dtype) {
  if (!t.defined()) return;
  detail::check_cpu(t, "batch_norm");
  LB_CHECK(t.dim() == 1 && t.size(0) == C, "batch_norm: ", name, " must have shape ",
           shape_str({C}), " for x ", shape_str(x.shape()), " (N, C, ...), got ",
           shape_str(t.shape()));
  if (same_dtype)
    LB_CHECK(t.dtype() == x.dtype(), "batch_norm: ", name, " is ", dtype_name(t.dtype()),
             " but x is ", dtype_name(x.dtype()));
  else
    LB_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, "batch_norm: ", name,
             " must be f32/f64, got ", dtype_name(t.dtype()));
}
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, Tensor running_mean,
                  Tensor running_var, bool training, double momentum, double eps) {
  detail::check_defined(x, "batch_norm", "x");
  detail::check_cpu(x, "batch_norm");
  detail::check_floating(x, "batch_norm");
  LB_CHECK(x.dim() >= 2, "batch_norm: x must be (N, C, ...), got ", shape_str(x.shape()));
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const int64_t M = N * S;
  check_channel_vec(weight, x, C, "weight", true);
  check_channel_vec(bias, x, C, "bias", true);
  check_channel_vec(running_mean, x, C, "running_mean", false);
  check_channel_vec(running_var, x, C, "running_var", false);
  LB_CHECK(running_mean.defined() == running_var.defined(),
           "batch_norm: give both running_mean and running_var, or neither");
  LB_CHECK(training || running_mean.defined(),
           "batch_norm: eval mode needs running_mean and running_var");
  LB_CHECK(!training || M > 1, "batch_norm: expected more than 1 value per channel when training, "
           "got x ", shape_str(x.shape()), ". HINT: use a batch of at least 2, or eval mode");
  LB_CHECK(eps >= 0, "batch_norm: eps must be >= 0, got ", eps);

  const Tensor xc = contiguous_nograd(x);
  const DType dt = x.dtype();
  Tensor mean = Tensor::empty({C}, dt, x.device());
  Tensor rstd = Tensor::empty({C}, dt, x.device());
  Tensor y = Tensor::empty(x.shape(), dt, x.device());
  detail::dispatch_float(dt, "batch_norm", [&](auto tag) {
    using T = decltype(tag);
    T* mp = mean.data<T>();
    T* rp = rstd.data<T>();
    if (training) {
      std::vector<double> var(C);
      batch_stats<T>(xc.data<T>(), N, C, S, mp, var.data());
      for (int64_t c = 0; c < C; ++c) rp[c] = static_cast<T>(1.0 / std::sqrt(var[c] + eps));
      if (running_mean.defined()) {
        // Updated through copy_ so that any layout or float dtype of the buffers works.
        const std::vector<double> rm = running_mean.to_double_vector();
        const std::vector<double> rv = running_var.to_double_vector();
        Tensor nm = Tensor::empty({C}, DType::F64), nv = Tensor::empty({C}, DType::F64);
        double* nmp = nm.data<double>();
        double* nvp = nv.data<double>();
        const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
        for (int64_t c = 0; c < C; ++c) {
          nmp[c] = (1.0 - momentum) * rm[c] + momentum * static_cast<double>(mp[c]);
          nvp[c] = (1.0 - momentum) * rv[c] + momentum * var[c] * unbias;
        }
        running_mean.copy_(nm);
        running_var.copy_(nv);
      }
    } else {
      const std::vector<double> rm = running_mean.to_double_vector();
      const std::vector<double> rv = running_var.to_double_vector();
      for (int64_t c = 0; c < C; ++c) {
        mp[c] = static_cast<T>(rm[c]);
        rp[c] = static_cast<T>(1.0 / std::sqrt(rv[c] + eps));
      }
    }
    // Fold (w, b, mean, rstd) into one multiply-add per element.
    const Tensor wc = weight.defined() ? contiguous_nograd(weight) : Tensor();
    const Tensor bc = bias.defined() ? contiguous_nograd(bias) : Tensor();
    std::vector<T> scale(C), shift(C);
    for (int64_t c = 0; c < C; ++c) {
      const T w = wc.defined() ? wc.data<T>()[c] : T(1);
      const T b = bc.defined() ? bc.data<T>()[c] : T(0);
      scale[c] = w * rp[c];
      shift[c] = b - mp[c] * scale[c];
    }
    batch_norm_apply<T>(xc.data<T>(), scale.data(), shift.data(), y.data<T>(), N, C, S);
  });

  if (autograd::should_record({x, weight, bias})) {
    // Eval mode with only bias needing a gradient would not need x, but that case is rare
    // (frozen weight, trained bias); x is usually alive anyway as the previous output.
    autograd::record(
        "batch_norm", y, {x, weight, bias}, {x, weight, mean, rstd},
        [N, C, S, training](const Tensor& g, const std::vector<Tensor>& s,
                            const std::vector<bool>& need) {
          const Tensor gc = contiguous_nograd(g);
          const Tensor xs = contiguous_nograd(s[0]);
          const Tensor ws = s[1].defined() ? contiguous_nograd(s[1]) : Tensor();
          Tensor dx, dw, db;
          if (need[0]) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
          if (need[1]) dw = Tensor::empty({C}, xs.dtype(), xs.device());
          if (need[2]) db = Tensor::empty({C}, xs.dtype(), xs.device());
          detail::dispatch_float(xs.dtype(), "batch_norm backward", [&](auto tag) {
            using T = decltype(tag);
            batch_norm_backward<T>(gc.data<T>(), xs.data<T>(),
                                   ws.defined() ? ws.data<T>() : nullptr, s[2].data<T>(),
                                   s[3].data<T>(), training,
                                   dx.defined() ? dx.data<T>() : nullptr,
                                   dw.defined() ? dw.data<T>() : nullptr,
                                   db.defined() ? db.data<T>() : nullptr, N, C, S);
          });
          return std::vector<Tensor>{dx, dw, db};
        });
  }
  return y;
}

}  // namespace lb
