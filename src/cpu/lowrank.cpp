// Thin token-axis projections (see lowrank.h). Work is split into tasks (sample b, column
// tile of W = two SIMD registers); each task walks the L rows of its tile once per block of
// kRB output rows, keeping the kRB × W accumulators in registers. The (L, W) tile of the big
// tensor stays in L1 between row blocks, so the big tensor streams from memory once.
#include "src/cpu/lowrank.h"

#include <algorithm>
#include <vector>

namespace lb::cpu {

namespace {

constexpr int64_t kRB = 8;  // output rows per register block

template <typename T>
constexpr int64_t tile_width() {
  return 2 * 64 / static_cast<int64_t>(sizeof(T));  // two 512-bit registers of T
}

// a (R, L) -> (L, Rp) with Rp = R rounded up to kRB, zero padded: the micro-kernels read kRB
// consecutive coefficients per token.
template <typename T>
std::vector<T> transpose_padded(const T* a, int64_t R, int64_t L, int64_t Rp) {
  std::vector<T> at(static_cast<size_t>(L * Rp), T(0));
  for (int64_t r = 0; r < R; ++r)
    for (int64_t l = 0; l < L; ++l) at[l * Rp + r] = a[r * L + l];
  return at;
}

// One task of project_tokens: rows [rb, rb + kRB) of the output, columns [c0, c0 + cw).
template <typename T, bool kFull>
inline void project_block(const T* at, int64_t Rp, int64_t rb, int64_t L, const T* xb, int64_t C,
                          int64_t c0, int64_t cw, T (&acc)[kRB][tile_width<T>()]) {
  constexpr int64_t W = tile_width<T>();
  for (int64_t i = 0; i < kRB; ++i)
    for (int64_t c = 0; c < W; ++c) acc[i][c] = T(0);
  for (int64_t l = 0; l < L; ++l) {
    const T* xr = xb + l * C + c0;
    T xv[W];
    if constexpr (kFull) {
      for (int64_t c = 0; c < W; ++c) xv[c] = xr[c];
    } else {
      for (int64_t c = 0; c < W; ++c) xv[c] = c < cw ? xr[c] : T(0);
    }
    const T* al = at + l * Rp + rb;
    for (int64_t i = 0; i < kRB; ++i) {
      const T s = al[i];
      for (int64_t c = 0; c < W; ++c) acc[i][c] += s * xv[c];
    }
  }
}

// One task of expand_tokens: adds rows [rb, rb + kRB) of the expansion into the (L, cw)
// tile of out (overwrites it when `first`).
template <typename T>
inline void expand_block(const T* at, int64_t Rp, int64_t rb, int64_t R, int64_t L,
                         const T* const* in_rows, int64_t in_off, int64_t cw, T* ob, int64_t C,
                         bool first) {
  constexpr int64_t W = tile_width<T>();
  T in[kRB][W];
  for (int64_t i = 0; i < kRB; ++i) {
    const T* src = rb + i < R ? in_rows[rb + i] + in_off : nullptr;
    for (int64_t c = 0; c < W; ++c) in[i][c] = (src && c < cw) ? src[c] : T(0);
  }
  for (int64_t l = 0; l < L; ++l) {
    const T* al = at + l * Rp + rb;
    T acc[W];
    for (int64_t c = 0; c < W; ++c) acc[c] = T(0);
    for (int64_t i = 0; i < kRB; ++i) {
      const T s = al[i];
      for (int64_t c = 0; c < W; ++c) acc[c] += s * in[i][c];
    }
    T* orow = ob + l * C;
    if (cw == W) {
      if (first)
        for (int64_t c = 0; c < W; ++c) orow[c] = acc[c];
      else
        for (int64_t c = 0; c < W; ++c) orow[c] += acc[c];
    } else {
      for (int64_t c = 0; c < cw; ++c) orow[c] = first ? acc[c] : orow[c] + acc[c];
    }
  }
}

}  // namespace

template <typename T>
void project_tokens(const T* a, int64_t R, int64_t L, const T* x, int64_t B, int64_t C,
                    T* const* out_rows, int64_t out_b_stride) {
  if (R == 0 || B == 0 || C == 0) return;
  constexpr int64_t W = tile_width<T>();
  const int64_t Rp = (R + kRB - 1) / kRB * kRB;
  const std::vector<T> at = transpose_padded(a, R, L, Rp);
  const int64_t tiles = (C + W - 1) / W;
  const double work = static_cast<double>(B) * static_cast<double>(L) * static_cast<double>(C) *
                      static_cast<double>(Rp);
#pragma omp parallel for collapse(2) schedule(static) if (work > 4e6)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t c0 = t * W, cw = std::min(W, C - c0);
      const T* xb = x + b * L * C;
      for (int64_t rb = 0; rb < Rp; rb += kRB) {
        T acc[kRB][W];
        if (cw == W)
          project_block<T, true>(at.data(), Rp, rb, L, xb, C, c0, cw, acc);
        else
          project_block<T, false>(at.data(), Rp, rb, L, xb, C, c0, cw, acc);
        for (int64_t i = 0; i < kRB && rb + i < R; ++i) {
          T* dst = out_rows[rb + i] + b * out_b_stride + c0;
          for (int64_t c = 0; c < cw; ++c) dst[c] = acc[i][c];
        }
      }
    }
}

template <typename T>
void expand_tokens(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                   int64_t B, int64_t C, T* out) {
  if (B == 0 || C == 0 || L == 0) return;
  constexpr int64_t W = tile_width<T>();
  if (R == 0) {
    std::fill(out, out + B * L * C, T(0));
    return;
  }
  const int64_t Rp = (R + kRB - 1) / kRB * kRB;
  const std::vector<T> at = transpose_padded(a, R, L, Rp);
  const int64_t tiles = (C + W - 1) / W;
  const double work = static_cast<double>(B) * static_cast<double>(L) * static_cast<double>(C) *
                      static_cast<double>(Rp);
#pragma omp parallel for collapse(2) schedule(static) if (work > 4e6)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t c0 = t * W, cw = std::min(W, C - c0);
      T* ob = out + b * L * C + c0;
      for (int64_t rb = 0; rb < Rp; rb += kRB)
        expand_block<T>(at.data(), Rp, rb, R, L, in_rows, b * in_b_stride + c0, cw, ob, C, rb == 0);
    }
}

template void project_tokens<float>(const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                                    float* const*, int64_t);
template void project_tokens<double>(const double*, int64_t, int64_t, const double*, int64_t,
                                     int64_t, double* const*, int64_t);
template void expand_tokens<float>(const float*, int64_t, int64_t, const float* const*, int64_t,
                                   int64_t, int64_t, float*);
template void expand_tokens<double>(const double*, int64_t, int64_t, const double* const*, int64_t,
                                    int64_t, int64_t, double*);

}  // namespace lb::cpu
