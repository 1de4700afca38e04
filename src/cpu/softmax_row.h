// Internal: one softmax row, the passes the softmax kernels (softmax.cpp) and the fused
// attention (attention.cpp) share, so that attention's P is the softmax op's bit for bit.
#pragma once
#include <cstdint>
#include <limits>

#include "src/backend/fast_exp.h"

namespace lb::cpu {

// z = x + mask written into z (x may be z: in place) while tracking the row max; `m` (null:
// no mask) has stride `msl` along the row. Returns the max, -inf for a row of -inf only (a
// fully masked row).
template <typename T>
T masked_row_max(const T* x, const T* m, int64_t msl, int64_t L, T* z) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T mx = kNegInf;
  if (m == nullptr) {
    if (x == z) {
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < L; ++j) mx = z[j] > mx ? z[j] : mx;
    } else {
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < L; ++j) {
        const T v = x[j];
        z[j] = v;
        mx = v > mx ? v : mx;  // by value: std::max's reference result defeats vectorization
      }
    }
  } else if (msl == 1) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < L; ++j) {
      const T v = x[j] + m[j];
      z[j] = v;
      mx = v > mx ? v : mx;
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < L; ++j) {
      const T v = x[j] + m[j * msl];
      z[j] = v;
      mx = v > mx ? v : mx;
    }
  }
  // The simd max reduction starts each lane at an implementation-defined "least value":
  // -inf under GCC, lowest() under clang. A row of -inf only must read as fully masked.
  if (!(mx > std::numeric_limits<T>::lowest())) mx = kNegInf;
  return mx;
}

// z ← e^(z − mx) / Σ e^(z − mx) in place, for a row whose max `mx` is finite; returns 1/sum.
template <typename T>
T exp_normalize_row(T* z, int64_t L, T mx) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < L; ++j) {
    const T e = lb::detail::fast_exp(z[j] - mx);
    z[j] = e;
    s += e;
  }
  const T inv = T(1) / s;
#pragma omp simd
  for (int64_t j = 0; j < L; ++j) z[j] *= inv;
  return inv;
}

}  // namespace lb::cpu
