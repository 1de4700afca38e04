// Parameter initialisers (in place, no autograd), drawing from the default generator unless
// a stream is given. Defaults of the layers match PyTorch's reset_parameters().
#pragma once
#include <functional>
#include <vector>

#include "lb/core/philox.h"
#include "lb/core/tensor.h"

namespace lb::nn::init {

// While one lives (on this thread), uniform_ and normal_ leave their tensor as it is and only
// move the default generator past the draws they would make, noting where they started.
// replay(needed) then draws, from those positions, every tensor `needed` says is needed (by
// its storage), so each gets the values eager initialisation would have given it, bit for
// bit, and the generator is where eager initialisation leaves it. A model about to be loaded
// from a checkpoint is built under one, and only what the checkpoint lacks is replayed:
// MiniLM's 22.7M random draws were half of building and loading it.
class DeferredInit {
 public:
  DeferredInit();
  ~DeferredInit();  // without replay(): ends the deferral, draws nothing
  DeferredInit(const DeferredInit&) = delete;
  DeferredInit& operator=(const DeferredInit&) = delete;
  void replay(const std::function<bool(const Storage*)>& needed);

  struct Pending {
    Tensor t;
    bool normal;
    double a, b;  // (lo, hi) or (mean, std)
    PhiloxStream::State from;
  };

 private:
  std::vector<Pending> pending_;
  bool active_ = true;
};

void uniform_(Tensor& t, double lo, double hi);
void normal_(Tensor& t, double mean, double std);
void constant_(Tensor& t, double value);
// PyTorch's Linear/Conv default: kaiming_uniform(a=√5) = U(±1/√fan_in) for the weight.
void kaiming_uniform_default_(Tensor& w, int64_t fan_in);
// Kaiming normal, fan_out mode, ReLU gain (torchvision ResNet convs).
void kaiming_normal_fan_out_(Tensor& w, int64_t fan_out);

}  // namespace lb::nn::init
