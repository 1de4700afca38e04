// Elementwise ops with NumPy/PyTorch broadcasting. Differentiable for f32/f64; gradients of a
// broadcast input are summed back to its shape (sum_to). Results are new contiguous tensors.
#pragma once
#include "lb/core/tensor.h"

namespace lb {

Shape broadcast_shapes(const Shape& a, const Shape& b);  // throws naming both shapes

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add_scalar(const Tensor& a, double s);
Tensor mul_scalar(const Tensor& a, double s);
Tensor rsub_scalar(const Tensor& a, double s);  // s - a
Tensor pow_scalar(const Tensor& a, double p);   // a^p

Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
// GELU: exact erf form, or the tanh approximation (PyTorch approximate="tanh").
enum class GeluApprox { None, Tanh };
Tensor gelu(const Tensor& a, GeluApprox approx = GeluApprox::None);

// In place, no autograd (for gradient accumulation and optimizers): dst += alpha * src,
// src broadcast to dst's shape.
void add_(Tensor& dst, const Tensor& src, double alpha = 1.0);
void mul_scalar_(Tensor& dst, double s);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add_scalar(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul_scalar(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul_scalar(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return add_scalar(a, -s); }
inline Tensor operator/(const Tensor& a, double s) { return mul_scalar(a, 1.0 / s); }

}  // namespace lb
