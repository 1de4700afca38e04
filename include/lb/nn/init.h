// Parameter initialisers (in place, no autograd), drawing from the default generator unless
// a stream is given. Defaults of the layers match PyTorch's reset_parameters().
#pragma once
#include "lb/core/philox.h"
#include "lb/core/tensor.h"

namespace lb::nn::init {

void uniform_(Tensor& t, double lo, double hi);
void normal_(Tensor& t, double mean, double std);
void constant_(Tensor& t, double value);
// PyTorch's Linear/Conv default: kaiming_uniform(a=√5) = U(±1/√fan_in) for the weight.
void kaiming_uniform_default_(Tensor& w, int64_t fan_in);
// Kaiming normal, fan_out mode, ReLU gain (torchvision ResNet convs).
void kaiming_normal_fan_out_(Tensor& w, int64_t fan_out);

}  // namespace lb::nn::init
