// SGD with momentum, dampening, Nesterov and (L2) weight decay — torch.optim.SGD's update:
//   g += wd·p;  buf = g (first step) or μ·buf + (1-dampening)·g;  g = nesterov ? g + μ·buf : buf;
//   p -= lr·g.
#include "lb/core/dispatch.h"
#include "lb/optim/optimizer.h"

namespace lb::optim {

SGD::SGD(std::vector<ParamGroup> groups, SgdOptions opts) : Optimizer(std::move(groups)), opts_(opts) {
  LB_CHECK(opts.momentum >= 0, "SGD momentum must be >= 0, got ", opts.momentum);
  LB_CHECK(!opts.nesterov || (opts.momentum > 0 && opts.dampening == 0),
           "SGD Nesterov momentum needs momentum > 0 and dampening 0");
}

nlohmann::json SGD::hyperparams() const {
  return {{"momentum", opts_.momentum}, {"dampening", opts_.dampening}, {"nesterov", opts_.nesterov}};
}

void SGD::update(Tensor& p, const Tensor& g, const ParamGroup& group,
                 std::map<std::string, Tensor>& state) {
  const bool use_mom = opts_.momentum != 0;
  bool first = false;
  if (use_mom && !state.count("momentum_buffer")) {
    state["momentum_buffer"] = Tensor::zeros(p.shape(), p.dtype(), p.device(), MemTag::Optimizer);
    first = true;
  }
  detail::dispatch_float(p.dtype(), "SGD", [&](auto tag) {
    using T = decltype(tag);
    T* w = p.data<T>();
    const T* gr = g.data<T>();
    T* buf = use_mom ? state["momentum_buffer"].template data<T>() : nullptr;
    const T lr = static_cast<T>(group.lr), wd = static_cast<T>(group.weight_decay);
    const T mu = static_cast<T>(opts_.momentum), damp = static_cast<T>(1 - opts_.dampening);
    const bool nesterov = opts_.nesterov;
    const int64_t n = p.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      T d = gr[i] + wd * w[i];
      if (buf) {
        buf[i] = first ? d : mu * buf[i] + damp * d;
        d = nesterov ? d + mu * buf[i] : buf[i];
      }
      w[i] -= lr * d;
    }
  });
}

}  // namespace lb::optim
