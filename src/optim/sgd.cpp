// SGD with momentum, dampening, Nesterov and (L2) weight decay — torch.optim.SGD's update:
//   g += wd·p;  buf = g (first step) or μ·buf + (1-dampening)·g;  g = nesterov ? g + μ·buf : buf;
//   p -= lr·g.
// The per-element update: src/backend/optim.h (CPU and CUDA kernels).
#include <type_traits>

#include "lb/core/dispatch.h"
#include "lb/optim/optimizer.h"
#include "src/backend/optim.h"

namespace lb::optim {

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions opts) : Optimizer(std::move(groups)), opts_(opts) {
  LB_CHECK(opts.momentum >= 0, "SGD momentum must be >= 0, got ", opts.momentum);
  LB_CHECK(!opts.nesterov || (opts.momentum > 0 && opts.dampening == 0),
           "SGD Nesterov momentum needs momentum > 0 and dampening 0");
}

nlohmann::json SGD::hyperparams() const {
  return {{"momentum", opts_.momentum}, {"dampening", opts_.dampening}, {"nesterov", opts_.nesterov}};
}

void SGD::update(const std::string&, Tensor& p, const Tensor& g, const ParamGroup& group,
                 std::map<std::string, Tensor>& state) {
  const bool use_mom = opts_.momentum != 0;
  bool first = false;
  if (use_mom && !state.count("momentum_buffer")) {
    state["momentum_buffer"] = Tensor::zeros(p.shape(), p.dtype(), p.device(), MemTag::Optimizer);
    first = true;
  }
  LB_CHECK(p.is_contiguous() && g.is_contiguous() && g.shape() == p.shape() && g.dtype() == p.dtype(),
           "SGD: the gradient must be a contiguous tensor of the parameter's shape and dtype");
  Tensor buf = use_mom ? state["momentum_buffer"] : Tensor();
  const auto& k = backend::optim_kernels(p.device());
  detail::dispatch_float(p.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    backend::SgdCoefs<T> c;
    c.lr = static_cast<T>(group.lr);
    c.wd = static_cast<T>(group.weight_decay);
    c.mu = static_cast<T>(opts_.momentum);
    c.damp = static_cast<T>(1 - opts_.dampening);
    c.momentum = use_mom;
    c.first = first;
    c.nesterov = opts_.nesterov;
    if constexpr (std::is_same_v<T, float>) k.sgd_f32(p, g, buf, c);
    else k.sgd_f64(p, g, buf, c);
  });
}

}  // namespace lb::optim
