// A block whose forward can be recomputed in backward (config memory.recompute): BERT's and
// ViT's encoder layers, ResNet's blocks. Set, it keeps only its input for backward
// (lb/autograd/recompute.h): the same gradients bit for bit, its activations alive only while
// its backward runs, its forward run twice.
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

 protected:
  // f(x) in this module's scope, kept as x alone and recomputed in backward when set (and
  // recording). f must capture by value what it reads besides x and parameters.
  Tensor run_block(const Tensor& x, const std::function<Tensor(const Tensor&)>& f);

 private:
  bool recompute_ = false;
};

}  // namespace lb::nn
