// Adam / AdamW with bias correction (torch.optim.Adam / AdamW):
//   AdamW: p *= 1 - lr·wd;   Adam: g += wd·p
//   m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
//   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
// The per-element update: src/backend/optim.h (CPU and CUDA kernels).
#include <cmath>
#include <type_traits>

#include "lb/core/dispatch.h"
#include "lb/optim/optimizer.h"
#include "src/backend/optim.h"

namespace lb::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions opts) : Optimizer(std::move(groups)), opts_(opts) {
  LB_CHECK(opts.beta1 >= 0 && opts.beta1 < 1 && opts.beta2 >= 0 && opts.beta2 < 1,
           "Adam betas must be in [0, 1), got (", opts.beta1, ", ", opts.beta2, ")");
  LB_CHECK(opts.eps >= 0, "Adam eps must be >= 0, got ", opts.eps);
}

nlohmann::json Adam::hyperparams() const {
  return {{"beta1", opts_.beta1}, {"beta2", opts_.beta2}, {"eps", opts_.eps},
          {"decoupled", opts_.decoupled}};
}

void Adam::update(Tensor& p, const Tensor& g, const ParamGroup& group,
                  std::map<std::string, Tensor>& state) {
  if (!state.count("exp_avg")) {
    state["exp_avg"] = Tensor::zeros(p.shape(), p.dtype(), p.device(), MemTag::Optimizer);
    state["exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype(), p.device(), MemTag::Optimizer);
  }
  const double t = static_cast<double>(step_count_);
  const double bc1 = 1 - std::pow(opts_.beta1, t), bc2 = 1 - std::pow(opts_.beta2, t);
  LB_CHECK(p.is_contiguous() && g.is_contiguous() && g.shape() == p.shape() && g.dtype() == p.dtype(),
           "Adam: the gradient must be a contiguous tensor of the parameter's shape and dtype");
  Tensor& m = state["exp_avg"];
  Tensor& v = state["exp_avg_sq"];
  const auto& k = backend::optim_kernels(p.device());
  detail::dispatch_float(p.dtype(), "Adam", [&](auto tag) {
    using T = decltype(tag);
    backend::AdamCoefs<T> c;
    c.b1 = static_cast<T>(opts_.beta1);
    c.b2 = static_cast<T>(opts_.beta2);
    c.eps = static_cast<T>(opts_.eps);
    c.step_size = static_cast<T>(group.lr / bc1);
    c.inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
    c.decay = static_cast<T>(opts_.decoupled ? 1.0 - group.lr * group.weight_decay : 1.0);
    c.l2 = static_cast<T>(opts_.decoupled ? 0.0 : group.weight_decay);
    if constexpr (std::is_same_v<T, float>) k.adam_f32(p, g, m, v, c);
    else k.adam_f64(p, g, m, v, c);
  });
}

}  // namespace lb::optim
