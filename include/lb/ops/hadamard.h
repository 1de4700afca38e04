// Fast Walsh–Hadamard transform along one axis, in independent blocks of 2^k (HOT uses
// k = 4). Unnormalised Sylvester order: applying it twice multiplies by the block size. The
// axis is zero-padded to a multiple of the block (the output is then longer). Differentiable
// (the transform is symmetric: backward applies it to the gradient and drops the padding).
#pragma once
#include "lb/core/tensor.h"

namespace lb {

Tensor fwht(const Tensor& x, int64_t dim, int64_t block_log2);

}  // namespace lb
