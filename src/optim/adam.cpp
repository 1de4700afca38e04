// Adam / AdamW with bias correction (torch.optim.Adam / AdamW):
//   AdamW: p *= 1 - lr·wd;   Adam: g += wd·p
//   m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
//   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
#include <cmath>

#include "lb/core/dispatch.h"
#include "lb/optim/optimizer.h"

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
  detail::dispatch_float(p.dtype(), "Adam", [&](auto tag) {
    using T = decltype(tag);
    T* w = p.data<T>();
    const T* gr = g.data<T>();
    T* m = state["exp_avg"].template data<T>();
    T* v = state["exp_avg_sq"].template data<T>();
    const T b1 = static_cast<T>(opts_.beta1), b2 = static_cast<T>(opts_.beta2);
    const T eps = static_cast<T>(opts_.eps);
    const T step_size = static_cast<T>(group.lr / bc1);
    const T inv_sqrt_bc2 = static_cast<T>(1.0 / std::sqrt(bc2));
    const T decay = static_cast<T>(opts_.decoupled ? 1.0 - group.lr * group.weight_decay : 1.0);
    const T l2 = static_cast<T>(opts_.decoupled ? 0.0 : group.weight_decay);
    const int64_t n = p.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      const T d = gr[i] + l2 * w[i];
      m[i] = b1 * m[i] + (1 - b1) * d;
      v[i] = b2 * v[i] + (1 - b2) * d * d;
      w[i] = w[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
  });
}

}  // namespace lb::optim
