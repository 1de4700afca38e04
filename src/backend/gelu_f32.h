// Internal: single-precision GELU and its derivative from plain arithmetic, so GCC vectorizes
// the f32 loops (std::erf / std::tanh are scalar libm calls, which dominated GELU's time).
// f64 (gradient checks) keeps the libm functions.
//   normal_cdf_f32: Φ(x) = erfc(-x/√2) / 2 with the erfc of Numerical Recipes (§6.2, erfcc:
//   t·exp(-z² + P(t)), t = 1/(1 + z/2), fractional error < 1.2e-7 for all z ≥ 0), so Φ keeps
//   its relative accuracy in the negative tail, where 1 + erf(x/√2) would cancel.
//   The tanh form is evaluated as x σ(2u) = x / (1 + e^{-2u}), which equals 0.5 x (1 + tanh u)
//   without the cancellation of 1 + tanh u in the negative tail.
#pragma once
#include "src/backend/fast_exp.h"

namespace lb::detail {

LB_HD inline float normal_cdf_f32(float x) {
  const float z = (x < 0.f ? -x : x) * 0.70710678118654752440f;
  const float t = 1.f / (1.f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t + -0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t + -1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t + -0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t + -1.26551223f;
  const float half_erfc = 0.5f * t * fast_exp(p - z * z);  // erfc(z) / 2 = Φ(-|x|)
  return x < 0.f ? half_erfc : 1.f - half_erfc;
}

inline constexpr float kInvSqrt2Pif = 0.39894228040143267794f;
inline constexpr float kSqrt2OverPif = 0.79788456080286535588f;

// gelu(x) = x Φ(x) = 0.5 x (1 + erf(x / √2))
LB_HD inline float gelu_f32(float x) { return x * normal_cdf_f32(x); }
// gelu'(x) = Φ(x) + x φ(x)
LB_HD inline float gelu_grad_f32(float x) {
  return normal_cdf_f32(x) + x * kInvSqrt2Pif * fast_exp(-0.5f * x * x);
}
// tanh form: 0.5 x (1 + tanh(u)) = x σ(2u), u = √(2/π) (x + 0.044715 x³)
LB_HD inline float gelu_tanh_f32(float x) {
  const float u = kSqrt2OverPif * (x + 0.044715f * x * x * x);
  return x / (1.f + fast_exp(-2.f * u));
}
// d/dx x σ(2u) = σ(2u) + x σ(2u) (1 - σ(2u)) 2 u'
LB_HD inline float gelu_tanh_grad_f32(float x) {
  const float u = kSqrt2OverPif * (x + 0.044715f * x * x * x);
  const float du = kSqrt2OverPif * (1.f + 3.f * 0.044715f * x * x);
  const float e = fast_exp(-2.f * u);
  const float s = 1.f / (1.f + e);
  const float one_minus_s = s > 0.5f ? e * s : 1.f - s;  // e = inf gives s = 0: use 1 - s
  // In the saturated tails the product term is 0 (without this, 0 · inf = NaN for |x| > 1e13).
  const float term = s > 0.f && one_minus_s > 0.f ? 2.f * x * s * one_minus_s * du : 0.f;
  return s + term;
}

}  // namespace lb::detail
