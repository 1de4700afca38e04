// Internal: the elementwise ops' formulas, shared by the CPU loops (src/cpu/elementwise.cpp)
// and the CUDA kernels (cuda/elementwise.cu). Each op is a template parameter so that a loop
// is compiled per op (and vectorised on the CPU) rather than switching per element.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "lb/core/error.h"
#include "lb/core/host_device.h"
#include "src/backend/gelu_f32.h"

namespace lb::backend {

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div };

// Unary ops with a scalar parameter s where they take one (add_scalar: x + s, pow: x^s).
enum class UnaryOp : uint8_t {
  AddScalar, MulScalar, RsubScalar, PowScalar, Neg, Exp, Log, Sqrt, Rsqrt, Tanh, Sigmoid, Gelu, GeluTanh
};

// What the backward multiplies the incoming gradient by a function of: nothing (a constant
// derivative), the input, or the output.
enum class DerivativeOf : uint8_t { Constant, Input, Output };

constexpr DerivativeOf derivative_of(UnaryOp op) {
  switch (op) {
    case UnaryOp::PowScalar:
    case UnaryOp::Log:
    case UnaryOp::Gelu:
    case UnaryOp::GeluTanh: return DerivativeOf::Input;
    case UnaryOp::Exp:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Tanh:
    case UnaryOp::Sigmoid: return DerivativeOf::Output;
    default: return DerivativeOf::Constant;
  }
}

template <BinaryOp Op, typename T>
LB_HD inline T binary_value(T x, T y) {
  if constexpr (Op == BinaryOp::Add) return x + y;
  else if constexpr (Op == BinaryOp::Sub) return x - y;
  else if constexpr (Op == BinaryOp::Mul) return x * y;
  else return x / y;
}

// The math functions: std:: on the host, CUDA's overloads on the device.
#if defined(__CUDA_ARCH__)
#define LB_MATH(f) ::f
#else
#define LB_MATH(f) std::f
#endif

// op(x; s), in double where s is a double (as the CPU always computed it), rounded to T.
template <UnaryOp Op, typename T>
LB_HD inline T unary_value(T x, double s) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  if constexpr (Op == UnaryOp::AddScalar) return static_cast<T>(x + s);
  else if constexpr (Op == UnaryOp::MulScalar) return static_cast<T>(x * s);
  else if constexpr (Op == UnaryOp::RsubScalar) return static_cast<T>(s - x);
  else if constexpr (Op == UnaryOp::PowScalar) return static_cast<T>(LB_MATH(pow)(static_cast<double>(x), s));
  else if constexpr (Op == UnaryOp::Neg) return -x;
  else if constexpr (Op == UnaryOp::Exp) return LB_MATH(exp)(x);
  else if constexpr (Op == UnaryOp::Log) return LB_MATH(log)(x);
  else if constexpr (Op == UnaryOp::Sqrt) return LB_MATH(sqrt)(x);
  else if constexpr (Op == UnaryOp::Rsqrt) return static_cast<T>(1.0 / LB_MATH(sqrt)(x));
  else if constexpr (Op == UnaryOp::Tanh) return LB_MATH(tanh)(x);
  else if constexpr (Op == UnaryOp::Sigmoid) return static_cast<T>(1.0 / (1.0 + LB_MATH(exp)(-x)));
  else if constexpr (Op == UnaryOp::Gelu) {
    // f32: the vectorisable formulas of gelu_f32.h; f64 (gradient checks): libm.
    if constexpr (std::is_same_v<T, float>) return detail::gelu_f32(x);
    else return 0.5 * x * (1.0 + LB_MATH(erf)(x * kInvSqrt2));
  } else {  // GeluTanh: 0.5 x (1 + tanh(u)), u = √(2/π)(x + 0.044715 x³)
    if constexpr (std::is_same_v<T, float>) return detail::gelu_tanh_f32(x);
    else return 0.5 * x * (1.0 + LB_MATH(tanh)(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
  }
}

// d op / dx as a function of v (the input or the output, per derivative_of; ignored for a
// constant), rounded to T so that the gradient's multiply stays in T.
template <UnaryOp Op, typename T>
LB_HD inline T unary_derivative(T v, double s) {
  constexpr double kInvSqrt2 = 0.70710678118654752440;
  constexpr double kInvSqrt2Pi = 0.39894228040143267794;
  constexpr double kSqrt2OverPi = 0.79788456080286535588;
  (void)v;
  (void)s;
  if constexpr (Op == UnaryOp::AddScalar) return T(1);
  else if constexpr (Op == UnaryOp::MulScalar) return static_cast<T>(s);
  else if constexpr (Op == UnaryOp::RsubScalar || Op == UnaryOp::Neg) return T(-1);
  else if constexpr (Op == UnaryOp::PowScalar) return static_cast<T>(s * LB_MATH(pow)(static_cast<double>(v), s - 1));
  else if constexpr (Op == UnaryOp::Exp) return v;
  else if constexpr (Op == UnaryOp::Log) return static_cast<T>(1.0 / v);
  else if constexpr (Op == UnaryOp::Sqrt) return static_cast<T>(0.5 / v);
  else if constexpr (Op == UnaryOp::Rsqrt) return static_cast<T>(-0.5 * v * v * v);
  else if constexpr (Op == UnaryOp::Tanh) return static_cast<T>(1.0 - v * v);
  else if constexpr (Op == UnaryOp::Sigmoid) return static_cast<T>(v * (1.0 - v));
  else if constexpr (Op == UnaryOp::Gelu) {  // Φ(x) + x φ(x)
    if constexpr (std::is_same_v<T, float>) return detail::gelu_grad_f32(v);
    else return 0.5 * (1.0 + LB_MATH(erf)(v * kInvSqrt2)) + v * kInvSqrt2Pi * LB_MATH(exp)(-0.5 * v * v);
  } else {
    if constexpr (std::is_same_v<T, float>) {
      return detail::gelu_tanh_grad_f32(v);
    } else {
      const double u = kSqrt2OverPi * (v + 0.044715 * v * v * v);
      const double t = LB_MATH(tanh)(u);
      const double du = kSqrt2OverPi * (1.0 + 3 * 0.044715 * v * v);
      return 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
    }
  }
}

#undef LB_MATH

// f(std::integral_constant<Op, op>{}) for the op given at run time: one switch per call, the
// loop inside f compiled per op.
template <typename F>
void dispatch_binary(BinaryOp op, F&& f) {
  switch (op) {
    case BinaryOp::Add: f(std::integral_constant<BinaryOp, BinaryOp::Add>{}); return;
    case BinaryOp::Sub: f(std::integral_constant<BinaryOp, BinaryOp::Sub>{}); return;
    case BinaryOp::Mul: f(std::integral_constant<BinaryOp, BinaryOp::Mul>{}); return;
    case BinaryOp::Div: f(std::integral_constant<BinaryOp, BinaryOp::Div>{}); return;
  }
  LB_FAIL("unknown binary op");
}

template <typename F>
void dispatch_unary(UnaryOp op, F&& f) {
  switch (op) {
#define LB_UNARY_CASE(name) \
  case UnaryOp::name: f(std::integral_constant<UnaryOp, UnaryOp::name>{}); return;
    LB_UNARY_CASE(AddScalar)
    LB_UNARY_CASE(MulScalar)
    LB_UNARY_CASE(RsubScalar)
    LB_UNARY_CASE(PowScalar)
    LB_UNARY_CASE(Neg)
    LB_UNARY_CASE(Exp)
    LB_UNARY_CASE(Log)
    LB_UNARY_CASE(Sqrt)
    LB_UNARY_CASE(Rsqrt)
    LB_UNARY_CASE(Tanh)
    LB_UNARY_CASE(Sigmoid)
    LB_UNARY_CASE(Gelu)
    LB_UNARY_CASE(GeluTanh)
#undef LB_UNARY_CASE
  }
  LB_FAIL("unknown unary op");
}

}  // namespace lb::backend
