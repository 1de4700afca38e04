// CPU kernel of the fast Walsh–Hadamard transform (src/backend/fwht.h; the op is
// src/ops/fwht.cpp), along one axis in independent blocks of B = 2^k. Unnormalised, Sylvester (natural) order:
//   H_1 = [1],  H_2n = [[H_n, H_n], [H_n, -H_n]],
// which is what the in-place butterfly below produces when the stride h doubles from 1:
// the last stage combines the two already-transformed halves as (top + bottom,
// top - bottom). The axis (length L) is zero-padded to Lp = ceil(L / B) * B.
// y = H P x with P the zero padding, so dx = P^T H^T dy = (H dy)[:L] (H is symmetric):
// backward is the same transform on the gradient, truncated; nothing is saved.
#include <algorithm>
#include <cstring>
#include <utility>

#include "lb/core/dispatch.h"
#include "src/backend/fwht.h"

namespace lb::backend {

namespace {
constexpr int64_t kParallelWork = 1 << 15;
constexpr int64_t kChunk = 512;  // columns per task when the axis is not the last one

// In-place butterfly on B contiguous values (generic B; any compiler).
template <typename T>
inline void butterfly(T* v, int64_t B) {
  for (int64_t h = 1; h < B; h <<= 1)
    for (int64_t i = 0; i < B; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const T a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}

#if defined(__GNUC__)
// The small stages (h < W, W values in one 64-byte vector) as whole-vector operations:
// stage h maps v[j] to s_j v[j] + v[j ^ h] with s_j = -1 where bit h of j is set, i.e.
// a + b for the lower and -b + a = a - b for the upper element of each pair: the same
// values, bit for bit, as the scalar butterfly, at one permute and one multiply-add per
// stage (about 6x faster than scalar code for B = 16).
template <typename T> struct LaneInt;
template <> struct LaneInt<float> { using type = int32_t; };
template <> struct LaneInt<double> { using type = int64_t; };

template <typename T, int W, int H, int... J>
inline auto simd_stage(auto v, std::integer_sequence<int, J...>) {
  typedef T V __attribute__((vector_size(sizeof(T) * W)));
  constexpr V sign = {((J & H) ? T(-1) : T(1))...};
#if defined(__clang__)
  return v * sign + __builtin_shufflevector(v, v, (J ^ H)...);
#else
  using I = typename LaneInt<T>::type;
  typedef I M __attribute__((vector_size(sizeof(I) * W)));
  constexpr M partner = {static_cast<I>(J ^ H)...};
  return v * sign + __builtin_shuffle(v, partner);
#endif
}
template <typename T, int W, int H = 1>
inline void simd_stages(auto& v) {
  if constexpr (H < W) {
    v = simd_stage<T, W, H>(v, std::make_integer_sequence<int, W>{});
    simd_stages<T, W, H * 2>(v);
  }
}
// Transforms each W-chunk of v[0, n) (n a multiple of W) with H_W.
template <typename T, int W>
inline void simd_chunks(T* v, int64_t n) {
  typedef T V __attribute__((vector_size(sizeof(T) * W)));
  for (int64_t c = 0; c < n; c += W) {
    V r;
    std::memcpy(&r, v + c, sizeof(V));
    simd_stages<T, W>(r);
    std::memcpy(v + c, &r, sizeof(V));
  }
}
#endif

// Transforms a contiguous row of n values (n a multiple of B) block by block.
template <typename T>
void fwht_row(T* v, int64_t n, int64_t B) {
#if defined(__GNUC__)
  constexpr int64_t kW = 64 / sizeof(T);  // lanes in 64 bytes: 16 floats, 8 doubles
  int64_t done = 1;  // stages h < done are applied
  if (B >= kW) {
    simd_chunks<T, kW>(v, n);
    done = kW;
  } else {
    switch (B) {
      case 2: simd_chunks<T, 2>(v, n); done = B; break;
      case 4: simd_chunks<T, 4>(v, n); done = B; break;
      case 8: simd_chunks<T, 8>(v, n); done = B; break;
      default: break;  // B == 1: nothing to do
    }
  }
  // Remaining stages pair runs of h >= kW contiguous values: plain vectorisable loops.
  for (int64_t h = done; h < B; h <<= 1)
    for (int64_t i = 0; i < n; i += 2 * h) {
      T* p = v + i;
      T* q = v + i + h;
      for (int64_t j = 0; j < h; ++j) {
        const T a = p[j], b = q[j];
        p[j] = a + b;
        q[j] = a - b;
      }
    }
#else
  for (int64_t b = 0; b < n; b += B) butterfly(v + b, B);
#endif
}

// x (outer, L, inner) contiguous -> y (outer, Lp, inner). Each task owns whole blocks of
// one outer row (and, for inner > 1, one chunk of columns), so tasks never share memory.
template <typename T>
void fwht_forward(const T* x, T* y, int64_t outer, int64_t L, int64_t Lp, int64_t inner,
                  int64_t B, int64_t k) {
  const int64_t nblocks = Lp / B;
  const bool par = outer * Lp * inner * std::max<int64_t>(k, 1) > kParallelWork;
  if (inner == 1) {
#pragma omp parallel for if (par) schedule(static)
    for (int64_t o = 0; o < outer; ++o) {
      T* yr = y + o * Lp;
      std::memcpy(yr, x + o * L, L * sizeof(T));
      std::fill(yr + L, yr + Lp, T(0));
      fwht_row(yr, Lp, B);
    }
    return;
  }
  const int64_t chunks = (inner + kChunk - 1) / kChunk;
#pragma omp parallel for collapse(3) if (par) schedule(static)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < nblocks; ++b)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t c0 = c * kChunk, w = std::min(kChunk, inner - c0);
        T* base = y + (o * Lp + b * B) * inner + c0;  // row t of the block: base + t * inner
        for (int64_t t = 0; t < B; ++t) {
          const int64_t l = b * B + t;
          if (l < L) std::memcpy(base + t * inner, x + (o * L + l) * inner + c0, w * sizeof(T));
          else std::fill(base + t * inner, base + t * inner + w, T(0));
        }
        // The same butterfly with each "value" a row of w columns (vectorises over columns).
        for (int64_t h = 1; h < B; h <<= 1)
          for (int64_t i = 0; i < B; i += 2 * h)
            for (int64_t j = i; j < i + h; ++j) {
              T* p = base + j * inner;
              T* q = base + (j + h) * inner;
              for (int64_t m = 0; m < w; ++m) {
                const T a = p[m], bb = q[m];
                p[m] = a + bb;
                q[m] = a - bb;
              }
            }
      }
}

void forward(const Tensor& x, Tensor& y, int64_t outer, int64_t L, int64_t Lp, int64_t inner, int64_t block_log2) {
  detail::dispatch_float(x.dtype(), "fwht", [&](auto tag) {
    using T = decltype(tag);
    fwht_forward<T>(x.data<T>(), y.data<T>(), outer, L, Lp, inner, int64_t{1} << block_log2, block_log2);
  });
}

}  // namespace

const FwhtKernels kCpuFwht{forward};

}  // namespace lb::backend
