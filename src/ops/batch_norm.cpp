// batch_norm over x (N, C, S...) per channel C, forward and backward, as
// torch.nn.functional.batch_norm. Training: batch mean and biased variance over the M = N*S
// values of a channel normalise x; running_mean/var are updated in place as
//   running = (1 - momentum) running + momentum stat   (variance unbiased: * M / (M - 1)).
// Eval: the running statistics normalise x. Saved for backward: x, weight, and one mean and
// one rstd per channel (2C values) — never x̂. The per-element work is in the device kernels
// (src/backend/batch_norm.h); the per-channel folding here is C-sized tensor ops in f64.
#include "lb/autograd/grad_mode.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/nn.h"
#include "src/backend/batch_norm.h"
#include "src/backend/copy.h"

namespace lb {

namespace {

void check_channel_vec(const Tensor& t, const Tensor& x, int64_t C, const char* name,
                       bool same_dtype) {
  if (!t.defined()) return;
  detail::check_same_device(t, x, "batch_norm");
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

  const Tensor xc = backend::contiguous(x);
  const DType dt = x.dtype();
  const backend::BatchNormKernels& k = backend::batch_norm_kernels(x.device());
  Tensor mean = Tensor::empty({C}, dt, x.device()), rstd, y = Tensor::empty(x.shape(), dt, x.device());
  {
    NoGradGuard no_grad;  // the folding below is not part of the graph
    if (training) {
      Tensor var = Tensor::empty({C}, DType::F64, x.device());
      k.stats(xc, N, C, S, mean, var);
      rstd = rsqrt(var + eps).to(dt);
      if (running_mean.defined()) {
        // Through copy_, so that any layout or float dtype of the buffers works.
        const double unbias = static_cast<double>(M) / static_cast<double>(M - 1);
        running_mean.copy_(running_mean.to(DType::F64) * (1.0 - momentum) + mean.to(DType::F64) * momentum);
        running_var.copy_(running_var.to(DType::F64) * (1.0 - momentum) + var * momentum * unbias);
      }
    } else {
      mean.copy_(running_mean);
      rstd = rsqrt(running_var.to(DType::F64) + eps).to(dt);
    }
    // Fold (w, b, mean, rstd) into one multiply-add per element.
    const Tensor scale = weight.defined() ? weight.detach() * rstd : rstd;
    const Tensor mean_scale = mean * scale;
    const Tensor shift = bias.defined() ? bias.detach() - mean_scale : rsub_scalar(mean_scale, 0.0);
    k.apply(xc, scale, shift, y, N, C, S);
  }

  if (autograd::should_record({x, weight, bias})) {
    // Eval mode with only bias needing a gradient would not need x, but that case is rare
    // (frozen weight, trained bias); x is usually alive anyway as the previous output.
    autograd::record(
        "batch_norm", y, {x, weight, bias}, {x, weight, mean, rstd},
        [N, C, S, training](const Tensor& g, const std::vector<Tensor>& s,
                            const std::vector<bool>& need) {
          const Tensor gc = backend::contiguous(g);
          const Tensor xs = backend::contiguous(s[0]);
          const Tensor ws = s[1].defined() ? backend::contiguous(s[1]) : Tensor();
          Tensor dx, dw, db;
          if (need[0]) dx = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
          if (need[1]) dw = Tensor::empty({C}, xs.dtype(), xs.device());
          if (need[2]) db = Tensor::empty({C}, xs.dtype(), xs.device());
          backend::batch_norm_kernels(xs.device())
              .backward(gc, xs, ws, s[2], s[3], training, dx, dw, db, N, C, S);
          return std::vector<Tensor>{dx, dw, db};
        });
  }
  return y;
}

}  // namespace lb
