// Parameter initialisers.
#include "lb/nn/init.h"

#include <cmath>

#include "lb/core/random.h"

namespace lb::nn::init {

void uniform_(Tensor& t, double lo, double hi) {
  t.copy_(rand_uniform(t.shape(), default_generator(), lo, hi, DType::F64));
}

void normal_(Tensor& t, double mean, double std) {
  t.copy_(rand_normal(t.shape(), default_generator(), mean, std, DType::F64));
}

void constant_(Tensor& t, double value) { t.fill_(value); }

void kaiming_uniform_default_(Tensor& w, int64_t fan_in) {
  const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
  uniform_(w, -bound, bound);
}

void kaiming_normal_fan_out_(Tensor& w, int64_t fan_out) {
  normal_(w, 0.0, std::sqrt(2.0 / static_cast<double>(fan_out)));
}

}  // namespace lb::nn::init
