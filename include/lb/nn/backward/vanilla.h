// vanilla backward strategy: exact backprop (saves x).
#pragma once
#include "lb/nn/backward/strategy.h"

namespace lb::nn::backward {

class Vanilla : public Strategy {
 public:
  std::string type() const override { return "vanilla"; }
  nlohmann::json hyperparams() const override { return {{"type", "vanilla"}}; }
  std::unique_ptr<Strategy> clone() const override { return std::make_unique<Vanilla>(); }
 protected:
  SavedState save_impl(const Tensor& x, const Tensor& w, const CallContext& call) override;
  SavedState save_conv_impl(const Tensor& x, const Tensor& w2d, const ConvGeometry& cg, const CallContext&) override {
    return save_conv_exact(x, w2d, cg);
  }
  Gradients backward_impl(const SavedState& s, const Tensor& g_y, const Tensor& w, bool want_gx,
                          bool want_gw) override;
};

}  // namespace lb::nn::backward
