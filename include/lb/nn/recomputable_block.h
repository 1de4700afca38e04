// A block whose forward can be recomputed in backward (config memory.recompute): BERT's and
// ViT's encoder layers, ResNet's blocks. Set, it keeps only its input for backward
// (lb/autograd/recompute.h): the same gradients bit for bit, its activations alive only while
// its backward runs, its forward run twice (with bf16 products: the second time on bf16
// operands, memory.recompute_bf16; lossy, see lb/autograd/recompute.h).
#pragma once
#include <functional>

#include "lb/nn/module.h"

namespace lb::nn {

class RecomputableBlock : public Module {
 public:
  bool set_recompute(bool on) override {
    recompute_ = on;
    return true;
  }
  bool recomputes() const { return recompute_; }
  // Whether a recomputation runs its matrix products in bf16 (only while recompute is set).
  void set_recompute_bf16(bool on) { recompute_bf16_ = on; }
  bool recomputes_bf16() const { return recompute_ && recompute_bf16_; }

 protected:
  // f(x) in this module's scope, kept as x alone and recomputed in backward when set (and
  // recording). f must capture by value what it reads besides x and parameters.
  Tensor run_block(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);

 private:
  bool recompute_ = false;
  bool recompute_bf16_ = false;
};

}  // namespace lb::nn
