// Internal to src/ops: dropout's draw and its mask, shared by dropout and dropout_linear so
// that both follow one randomness convention (src/ops/dropout.cpp) and give the same mask for
// the same stream.
#pragma once
#include "lb/core/philox.h"
#include "lb/core/tensor.h"

namespace lb::ops_internal {

struct DropoutDraw {
  Tensor y;     // x · keep / (1 - p), contiguous
  Tensor mask;  // bit-packed keep bits (numel(x) / 8 bytes, rounded up), U8
  double scale = 1;  // 1 / (1 - p); 0 for p = 1
};

// Draws the mask for x (any layout, f32/f64) from `rng` (advanced by numel(x)) and applies it.
DropoutDraw draw_dropout(const Tensor& x, double p, PhiloxStream& rng);

// x · mask · scale, element for element (the backward kernel: the draw's very products, so
// applied to the drawn x it gives y again, bit for bit). x is made contiguous first.
Tensor apply_dropout_mask(const Tensor& x, const Tensor& mask, double scale);

}  // namespace lb::ops_internal
