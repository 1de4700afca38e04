// Internal: an exp that GCC auto-vectorizes (plain arithmetic, no libm call), for the f32 row
// loops of softmax, log_softmax and cross_entropy. glibc's vector expf is only used under
// -ffast-math, and a scalar expf per element dominates softmax on the CPU.
// f32: Cephes expf (range reduction x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial), within
// 2 ulp of expf on [-86.5, 88.7]; x < -86.5 gives 0 (true value < 2.7e-38), so exp(-inf) = 0,
// x > 88.72 gives inf, NaN stays NaN. f64 (gradient checks only) uses std::exp. The CUDA
// kernels run the same code (LB_HD).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "lb/core/host_device.h"

namespace lb::detail {

LB_HD inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kLo = -86.5f, kHi = 88.72283935546875f;
  // Clamped so that NaN also lands in range (NaN compares false): the int conversion below
  // must never see NaN (undefined behaviour; the result is replaced by NaN at the end).
  const float xc = x > kLo ? (x < kHi ? x : kHi) : kLo;
  // n = rint(xc / ln2) by the 1.5 * 2^23 trick (std::floor blocks GCC's vectorizer).
  constexpr float kRound = 12582912.0f;
  const float n = (xc * kLog2e + kRound) - kRound;  // n in [-125, 128]
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // 2^n as 2 * 2^(n-1) so that n = 128 (x near ln FLT_MAX) stays a normal exponent; p * 2
  // first keeps the product normal when 2^(n-1) is the smallest normal.
  const int32_t bits = (static_cast<int32_t>(n) + 126) << 23;
#if defined(__CUDA_ARCH__)
  const float scale = __int_as_float(bits);
#else
  float scale;
  std::memcpy(&scale, &bits, 4);
#endif
  const float y = (p * 2.0f) * scale;
  const float big = x > kHi ? INFINITY : y;
  const float out = x < kLo ? 0.0f : big;
  return x != x ? x : out;
}

LB_HD inline double fast_exp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}

}  // namespace lb::detail
