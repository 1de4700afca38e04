// Losses with mean reduction, forward and backward: cross_entropy (fused log-softmax + NLL
// with ignore_index and label smoothing, as torch.nn.functional.cross_entropy in PyTorch
// >= 1.13) and mse_loss.
//
// cross_entropy, for logits x (N, C), targets t (N), smoothing ε and the V rows with
// t_i != ignore_index (the loss is the mean over those rows):
//   lse_i  = log Σ_j e^{x_ij}
//   loss   = (1/V) Σ_{i valid} [ (1-ε)(lse_i - x_{i,t_i}) + ε (lse_i - (1/C) Σ_j x_ij) ]
//   dx_ij  = (g/V) (softmax_ij - (1-ε)[j = t_i] - ε/C)   for valid rows, 0 for ignored rows.
// Saved for backward: the logits (the caller's tensor), lse (N values) and the targets; the
// softmax is recomputed from them, so no (N, C) log-prob tensor is ever stored.
// V = 0 (every target ignored) gives loss 0 with zero gradients; PyTorch gives NaN (0/0),
// which would poison the parameters of a training run.
#include <limits>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"
#include "src/backend/copy.h"
#include "src/backend/losses.h"

namespace lb {

namespace {

// Reads target i of a contiguous i32/i64 tensor.
inline int64_t target_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::I64 ? t.data<int64_t>()[i]
                                 : static_cast<int64_t>(t.data<int32_t>()[i]);
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                     double label_smoothing) {
  detail::check_defined(logits, "cross_entropy", "logits");
  detail::check_defined(targets, "cross_entropy", "targets");
  detail::check_same_device(logits, targets, "cross_entropy");
  detail::check_floating(logits, "cross_entropy");
  LB_CHECK(logits.dim() == 2, "cross_entropy: logits must be (N, C), got ",
           shape_str(logits.shape()), ". HINT: flatten (B, T, C) logits with .view({-1, C})");
  LB_CHECK(targets.dtype() == DType::I64 || targets.dtype() == DType::I32,
           "cross_entropy: targets must be i64 class indices, got ", dtype_name(targets.dtype()));
  const int64_t N = logits.size(0), C = logits.size(1);
  LB_CHECK(targets.dim() == 1 && targets.size(0) == N, "cross_entropy: targets must be ",
           shape_str({N}), " for logits ", shape_str(logits.shape()), ", got ",
           shape_str(targets.shape()));
  LB_CHECK(C > 0, "cross_entropy: logits ", shape_str(logits.shape()), " have no classes");
  LB_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "cross_entropy: label_smoothing must be in [0, 1], got ", label_smoothing);

  // Targets as a contiguous i64 tensor, validated up front on the host (N values; also what
  // backward reads, on the logits' device).
  const Tensor tc = backend::contiguous(targets).to(Device::cpu());
  Tensor tgt = tc.dtype() == DType::I64 ? tc : Tensor::empty({N}, DType::I64);
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) {
    const int64_t t = target_at(tc, i);
    if (tc.dtype() != DType::I64) tgt.data<int64_t>()[i] = t;
    if (t == ignore_index) continue;
    LB_CHECK(t >= 0 && t < C, "cross_entropy: target ", t, " at row ", i,
             " is out of range for ", C, " classes (logits ", shape_str(logits.shape()),
             ", ignore_index ", ignore_index, ")");
    ++valid;
  }

  tgt = tgt.to(logits.device());
  const Tensor xc = backend::contiguous(logits);
  Tensor lse = Tensor::empty({N}, logits.dtype(), logits.device());
  const double total =
      backend::loss_kernels(logits.device()).cross_entropy_forward(xc, tgt, ignore_index, label_smoothing, lse);
  Tensor loss = Tensor::scalar(valid == 0 ? 0.0 : total / static_cast<double>(valid), logits.dtype())
                    .to(logits.device());

  if (autograd::should_record({logits})) {
    autograd::record(
        "cross_entropy", loss, {logits, targets}, {logits, lse, tgt},
        [N, C, valid, ignore_index, label_smoothing](
            const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          if (!need[0]) return std::vector<Tensor>{Tensor(), Tensor()};
          const Tensor xs = backend::contiguous(s[0]);
          Tensor dx = Tensor::empty({N, C}, xs.dtype(), xs.device());
          const double coef = valid == 0 ? 0.0 : g.to(Device::cpu()).item_double() / static_cast<double>(valid);
          backend::loss_kernels(xs.device())
              .cross_entropy_backward(xs, s[2], s[1], ignore_index, label_smoothing, coef, dx);
          return std::vector<Tensor>{dx, Tensor()};
        });
  }
  return loss;
}

// mse = (1/n) Σ (a - b)²;  da = (2g/n)(a - b),  db = -da. Saves both inputs (usually alive
// anyway: the model output and the data), no difference tensor.
Tensor mse_loss(const Tensor& input, const Tensor& target) {
  detail::check_defined(input, "mse_loss", "input");
  detail::check_defined(target, "mse_loss", "target");
  detail::check_same_device(input, target, "mse_loss");
  detail::check_floating(input, "mse_loss");
  detail::check_same_dtype(input, target, "mse_loss");
  LB_CHECK(input.shape() == target.shape(), "mse_loss: input ", shape_str(input.shape()),
           " and target ", shape_str(target.shape()),
           " must have the same shape. HINT: reshape the target (e.g. (N) vs (N, 1))");
  const Tensor ac = backend::contiguous(input), bc = backend::contiguous(target);
  const int64_t n = input.numel();
  const double total = backend::loss_kernels(input.device()).squared_error_sum(ac, bc);
  // n = 0: NaN, as PyTorch (the mean of nothing).
  Tensor loss = Tensor::scalar(n == 0 ? std::numeric_limits<double>::quiet_NaN()
                                      : total / static_cast<double>(n),
                               input.dtype())
                    .to(input.device());
  if (autograd::should_record({input, target})) {
    autograd::record(
        "mse_loss", loss, {input, target}, {input, target},
        [n](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          const Tensor a = backend::contiguous(s[0]), b = backend::contiguous(s[1]);
          const double coef = 2.0 * g.to(Device::cpu()).item_double() / static_cast<double>(n);
          Tensor da = Tensor::empty(a.shape(), a.dtype(), a.device());
          Tensor db = need[1] ? Tensor::empty(a.shape(), a.dtype(), a.device()) : Tensor();
          backend::loss_kernels(a.device()).squared_error_grad(a, b, coef, da, db);
          return std::vector<Tensor>{need[0] ? da : Tensor(), db};
        });
  }
  return loss;
}

}  // namespace lb
