// Thin token-axis projections (see lowrank.h). Work is split into tasks (sample b, column
// tile of W = two SIMD registers); each task walks the L rows of its tile once per block of
// kRB output rows, keeping the kRB × W accumulators in registers. The (L, W) tile of the big
// tensor stays in L1 between row blocks, so the big tensor streams from memory once.
#include "src/cpu/lowrank.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "lb/core/dispatch.h"
#include "src/backend/copy.h"
#include "src/backend/lowrank.h"
#include "src/cpu/gemm.h"
#include "src/cpu/gemm_serial.h"

namespace lb::cpu {

namespace {

// The tile kernels' vector and register block, sized to the build's registers: 32 × 512-bit
// on AVX-512 (kRB = 8 rows × two vectors: 16 accumulators); 16 × 256-bit on AVX2, where a
// 64-byte vector lowers to register pairs and 16 accumulator pairs spill, so half-width
// vectors and 4 rows (8 accumulators). Every output element is the same sum in the same order
// either way.
#if defined(__AVX512F__)
constexpr int kTileBytes = 64;
constexpr int64_t kRB = 8;  // output rows per register block
#else
constexpr int kTileBytes = 32;
constexpr int64_t kRB = 4;
#endif

// One vector of T through the GCC/Clang vector extension (64 bytes: lowered to AVX-512, or to
// pairs of AVX2 registers, by -march), plus an unaligned alias for loads and stores.
template <typename T, int Bytes = 64>
struct Simd {
  typedef T V __attribute__((vector_size(Bytes)));
  typedef T VU __attribute__((vector_size(Bytes), aligned(sizeof(T))));
};

template <typename T, int Bytes = 64>
constexpr int64_t kLanes = Bytes / static_cast<int64_t>(sizeof(T));
template <typename T>
constexpr int64_t tile_width() {
  return 2 * kLanes<T, kTileBytes>;  // two vectors per row
}

template <typename T, int Bytes = 64>
inline typename Simd<T, Bytes>::V load(const T* p) {
  return *reinterpret_cast<const typename Simd<T, Bytes>::VU*>(p);
}
template <typename T, int Bytes = 64>
inline void store(T* p, typename Simd<T, Bytes>::V v) {
  *reinterpret_cast<typename Simd<T, Bytes>::VU*>(p) = v;
}
// Broadcast by listing the lanes (`V{} + s` would cost an extra add to honour -0.0).
template <typename T, int Bytes, size_t... I>
inline typename Simd<T, Bytes>::V splat_impl(T s, std::index_sequence<I...>) {
  return typename Simd<T, Bytes>::V{((void)I, s)...};
}
template <typename T, int Bytes = 64>
inline typename Simd<T, Bytes>::V splat(T s) {
  return splat_impl<T, Bytes>(s, std::make_index_sequence<static_cast<size_t>(kLanes<T, Bytes>)>{});
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

// project_tokens, one full tile: rows [rb, rb + kRB) × columns [0, W) of sample xb, written
// to out[i] (for the rows that exist). 16 accumulators live in registers.
// With kSum, also the column sums of the tile (two more registers) into sums[0, W).
template <typename T, bool kSum>
inline void project_tile(const T* at, int64_t Rp, int64_t L, const T* xb, int64_t C, T* const* out,
                         int64_t nrows, T* sums) {
  using V = typename Simd<T, kTileBytes>::V;
  constexpr int64_t VL = kLanes<T, kTileBytes>;
  constexpr auto load = lb::cpu::load<T, kTileBytes>;
  constexpr auto store = lb::cpu::store<T, kTileBytes>;
  constexpr auto splat = lb::cpu::splat<T, kTileBytes>;
  V a0[kRB], a1[kRB];
  V s0{}, s1{};
  for (int64_t i = 0; i < kRB; ++i) a0[i] = a1[i] = V{};
  for (int64_t l = 0; l < L; ++l) {
    const V x0 = load(xb + l * C), x1 = load(xb + l * C + VL);
    if constexpr (kSum) {
      s0 += x0;
      s1 += x1;
    }
    const T* al = at + l * Rp;
    for (int64_t i = 0; i < kRB; ++i) {
      const V s = splat(al[i]);
      a0[i] += s * x0;
      a1[i] += s * x1;
    }
  }
  for (int64_t i = 0; i < nrows; ++i) {
    store(out[i], a0[i]);
    store(out[i] + VL, a1[i]);
  }
  if constexpr (kSum) {
    store(sums, s0);
    store(sums + VL, s1);
  }
}

// project_tokens, a partial tile of cw < W columns (scalar).
template <typename T>
inline void project_tail(const T* at, int64_t Rp, int64_t L, const T* xb, int64_t C, int64_t cw,
                         T* const* out, int64_t nrows, T* sums) {
  for (int64_t i = 0; i < nrows; ++i)
    for (int64_t c = 0; c < cw; ++c) {
      T acc = 0;
      for (int64_t l = 0; l < L; ++l) acc += at[l * Rp + i] * xb[l * C + c];
      out[i][c] = acc;
    }
  if (sums)
    for (int64_t c = 0; c < cw; ++c) {
      T acc = 0;
      for (int64_t l = 0; l < L; ++l) acc += xb[l * C + c];
      sums[c] = acc;
    }
}

// expand_tokens, one full tile: out[l, 0:W] (+)= Σ_{i<kRB} at[l, i] · in[i][0:W]. The kRB
// input rows live in 16 registers; each output row is written once per row block.
template <typename T>
inline void expand_tile(const T* at, int64_t Rp, int64_t L, const T* const* in, int64_t nrows,
                        T* ob, int64_t C, bool first) {
  using V = typename Simd<T, kTileBytes>::V;
  constexpr int64_t VL = kLanes<T, kTileBytes>;
  constexpr auto load = lb::cpu::load<T, kTileBytes>;
  constexpr auto store = lb::cpu::store<T, kTileBytes>;
  constexpr auto splat = lb::cpu::splat<T, kTileBytes>;
  V i0[kRB], i1[kRB];
  for (int64_t i = 0; i < kRB; ++i) {
    i0[i] = i < nrows ? load(in[i]) : V{};
    i1[i] = i < nrows ? load(in[i] + VL) : V{};
  }
  for (int64_t l = 0; l < L; ++l) {
    const T* al = at + l * Rp;
    V o0 = first ? V{} : load(ob + l * C), o1 = first ? V{} : load(ob + l * C + VL);
    for (int64_t i = 0; i < kRB; ++i) {
      const V s = splat(al[i]);
      o0 += s * i0[i];
      o1 += s * i1[i];
    }
    store(ob + l * C, o0);
    store(ob + l * C + VL, o1);
  }
}

template <typename T>
inline void expand_tail(const T* at, int64_t Rp, int64_t L, const T* const* in, int64_t nrows,
                        int64_t cw, T* ob, int64_t C, bool first) {
  for (int64_t l = 0; l < L; ++l)
    for (int64_t c = 0; c < cw; ++c) {
      T acc = first ? T(0) : ob[l * C + c];
      for (int64_t i = 0; i < nrows; ++i) acc += at[l * Rp + i] * in[i][c];
      ob[l * C + c] = acc;
    }
}

}  // namespace

namespace {

// Sample b of a batch: its first row in x (or out) and its token count. Uniform samples of L
// rows, or variable-length ones back to back (offsets, B + 1 of them).
struct Samples {
  int64_t L;
  const int64_t* offsets;  // null: uniform
  int64_t start(int64_t b) const { return offsets ? offsets[b] : b * L; }
  int64_t length(int64_t b) const { return offsets ? offsets[b + 1] - offsets[b] : L; }
  int64_t rows(int64_t B) const { return offsets ? offsets[B] : B * L; }
};

// A sample of L_b ≤ L tokens uses a's first L_b columns: the first L_b rows of its transpose.
template <typename T>
void project_impl(const T* a, int64_t R, int64_t L, const T* x, const Samples& smp, int64_t B,
                  int64_t C, T* const* out_rows, int64_t out_b_stride, T* col_sums) {
  if (R == 0 || B == 0 || C == 0) return;
  constexpr int64_t W = tile_width<T>();
  const int64_t Rp = (R + kRB - 1) / kRB * kRB;
  const std::vector<T> at = transpose_padded(a, R, L, Rp);
  const int64_t tiles = (C + W - 1) / W;
  const double work = static_cast<double>(smp.rows(B)) * static_cast<double>(C) * static_cast<double>(Rp);
#pragma omp parallel for collapse(2) schedule(static) if (work > 4e6)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t c0 = t * W, cw = std::min(W, C - c0), Lb = smp.length(b);
      const T* xb = x + smp.start(b) * C + c0;
      for (int64_t rb = 0; rb < Rp; rb += kRB) {
        const int64_t nrows = std::min(kRB, R - rb);
        T* out[kRB];
        for (int64_t i = 0; i < nrows; ++i) out[i] = out_rows[rb + i] + b * out_b_stride + c0;
        // Column sums ride along with the first row block.
        T* sums = (col_sums && rb == 0) ? col_sums + b * C + c0 : nullptr;
        if (cw < W)
          project_tail(at.data() + rb, Rp, Lb, xb, C, cw, out, nrows, sums);
        else if (sums)
          project_tile<T, true>(at.data() + rb, Rp, Lb, xb, C, out, nrows, sums);
        else
          project_tile<T, false>(at.data() + rb, Rp, Lb, xb, C, out, nrows, nullptr);
      }
    }
}

template <typename T>
void expand_impl(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                 const Samples& smp, int64_t B, int64_t C, T* out) {
  if (B == 0 || C == 0 || L == 0) return;
  constexpr int64_t W = tile_width<T>();
  if (R == 0) {
    std::fill(out, out + smp.rows(B) * C, T(0));
    return;
  }
  const int64_t Rp = (R + kRB - 1) / kRB * kRB;
  const std::vector<T> at = transpose_padded(a, R, L, Rp);
  const int64_t tiles = (C + W - 1) / W;
  const double work = static_cast<double>(smp.rows(B)) * static_cast<double>(C) * static_cast<double>(Rp);
#pragma omp parallel for collapse(2) schedule(static) if (work > 4e6)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < tiles; ++t) {
      const int64_t c0 = t * W, cw = std::min(W, C - c0), Lb = smp.length(b);
      T* ob = out + smp.start(b) * C + c0;
      for (int64_t rb = 0; rb < Rp; rb += kRB) {
        const int64_t nrows = std::min(kRB, R - rb);
        const T* in[kRB];
        for (int64_t i = 0; i < nrows; ++i) in[i] = in_rows[rb + i] + b * in_b_stride + c0;
        if (cw == W)
          expand_tile(at.data() + rb, Rp, Lb, in, nrows, ob, C, rb == 0);
        else
          expand_tail(at.data() + rb, Rp, Lb, in, nrows, cw, ob, C, rb == 0);
      }
    }
}

}  // namespace

template <typename T>
void project_tokens(const T* a, int64_t R, int64_t L, const T* x, int64_t B, int64_t C,
                    T* const* out_rows, int64_t out_b_stride, T* col_sums) {
  project_impl(a, R, L, x, Samples{L, nullptr}, B, C, out_rows, out_b_stride, col_sums);
}

template <typename T>
void expand_tokens(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                   int64_t B, int64_t C, T* out) {
  expand_impl(a, R, L, in_rows, in_b_stride, Samples{L, nullptr}, B, C, out);
}

template <typename T>
void project_segments(const T* a, int64_t R, int64_t L, const T* x, const int64_t* offsets,
                      int64_t B, int64_t C, T* const* out_rows, int64_t out_b_stride, T* col_sums) {
  project_impl(a, R, L, x, Samples{L, offsets}, B, C, out_rows, out_b_stride, col_sums);
}

template <typename T>
void expand_segments(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                     const int64_t* offsets, int64_t B, int64_t C, T* out) {
  expand_impl(a, R, L, in_rows, in_b_stride, Samples{L, offsets}, B, C, out);
}

namespace {
// Σ_k a[k] · b[k] with vector accumulators (a float reduction does not vectorise without
// reassociation, which we only allow here, explicitly).
template <typename T>
inline T dot(const T* a, const T* b, int64_t K) {
  using V = typename Simd<T>::V;
  constexpr int64_t VL = kLanes<T>;
  V acc0{}, acc1{};
  int64_t k = 0;
  for (; k + 2 * VL <= K; k += 2 * VL) {
    acc0 += load(a + k) * load(b + k);
    acc1 += load(a + k + VL) * load(b + k + VL);
  }
  for (; k + VL <= K; k += VL) acc0 += load(a + k) * load(b + k);
  acc0 += acc1;
  T s = 0;
  for (int64_t i = 0; i < VL; ++i) s += acc0[i];
  for (; k < K; ++k) s += a[k] * b[k];
  return s;
}
template <typename T>
inline T total(const T* a, int64_t K) {
  using V = typename Simd<T>::V;
  constexpr int64_t VL = kLanes<T>;
  V acc{};
  int64_t k = 0;
  for (; k + VL <= K; k += VL) acc += load(a + k);
  T s = 0;
  for (int64_t i = 0; i < VL; ++i) s += acc[i];
  for (; k < K; ++k) s += a[k];
  return s;
}
}  // namespace

template <typename T>
void rows_dot_acc(const T* a, int64_t M, const T* b, int64_t N, int64_t K, T* c) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) c[m * N + n] += dot(a + m * K, b + n * K, K);
}

template <typename T>
void row_sums_acc(const T* a, int64_t M, int64_t K, T* out) {
  for (int64_t m = 0; m < M; ++m) out[m] += total(a + m * K, K);
}

template <typename T>
void gram_acc(bool trans, int64_t n, int64_t k, double alpha, const T* a, int64_t lda, T* c, int64_t ldc) {
  gemm(trans, !trans, n, n, k, static_cast<T>(alpha), a, lda, a, lda, T(1), c, ldc > 0 ? ldc : n);
}
template void gram_acc<float>(bool, int64_t, int64_t, double, const float*, int64_t, float*, int64_t);
template void gram_acc<double>(bool, int64_t, int64_t, double, const double*, int64_t, double*, int64_t);

template void rows_dot_acc<float>(const float*, int64_t, const float*, int64_t, int64_t, float*);
template void rows_dot_acc<double>(const double*, int64_t, const double*, int64_t, int64_t, double*);
template void row_sums_acc<float>(const float*, int64_t, int64_t, float*);
template void row_sums_acc<double>(const double*, int64_t, int64_t, double*);

template void project_tokens<float>(const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                                    float* const*, int64_t, float*);
template void project_tokens<double>(const double*, int64_t, int64_t, const double*, int64_t,
                                     int64_t, double* const*, int64_t, double*);
template void expand_tokens<float>(const float*, int64_t, int64_t, const float* const*, int64_t,
                                   int64_t, int64_t, float*);
template void expand_tokens<double>(const double*, int64_t, int64_t, const double* const*, int64_t,
                                    int64_t, int64_t, double*);
template void project_segments<float>(const float*, int64_t, int64_t, const float*, const int64_t*,
                                      int64_t, int64_t, float* const*, int64_t, float*);
template void project_segments<double>(const double*, int64_t, int64_t, const double*, const int64_t*,
                                       int64_t, int64_t, double* const*, int64_t, double*);
template void expand_segments<float>(const float*, int64_t, int64_t, const float* const*, int64_t,
                                     const int64_t*, int64_t, int64_t, float*);
template void expand_segments<double>(const double*, int64_t, int64_t, const double* const*, int64_t,
                                      const int64_t*, int64_t, int64_t, double*);

}  // namespace lb::cpu

// ---------------------------------------------------------------- the CPU table (src/backend/lowrank.h)

namespace lb::backend {
namespace {

// Row pointers of a (R, S, C) buffer: row r of sample s starts at rows[r] + s·C.
template <typename T>
std::vector<T*> row_bases(T* base, int64_t R, int64_t S, int64_t C) {
  std::vector<T*> rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) rows[r] = base + r * S * C;
  return rows;
}

void project(const Tensor& a, const Tensor& x, const std::vector<int64_t>* offsets, Tensor& out, Tensor& bias) {
  const int64_t R = a.size(0), Lp = a.size(1), C = x.size(2);
  const int64_t S = offsets ? static_cast<int64_t>(offsets->size()) - 1 : x.size(0);
  detail::dispatch_float(x.dtype(), "instant projection", [&](auto tag) {
    using T = decltype(tag);
    auto rows = row_bases(out.data<T>(), R, S, C);
    std::vector<T> partial(bias.defined() ? static_cast<size_t>(S * C) : 0);
    T* sums = bias.defined() ? partial.data() : nullptr;
    if (offsets)
      cpu::project_segments(a.data<T>(), R, Lp, x.data<T>(), offsets->data(), S, C, rows.data(), C, sums);
    else
      cpu::project_tokens(a.data<T>(), R, x.size(1), x.data<T>(), S, C, rows.data(), C, sums);
    if (!bias.defined()) return;
    // Per-sample column sums reduced over the samples in order.
    T* gb = bias.data<T>();
    for (int64_t c = 0; c < C; ++c) gb[c] = S > 0 ? partial[c] : T(0);
    for (int64_t s = 1; s < S; ++s)
      for (int64_t c = 0; c < C; ++c) gb[c] += partial[s * C + c];
  });
}

void expand(const Tensor& a, const Tensor& in, const std::vector<int64_t>* offsets, Tensor& out) {
  const int64_t R = a.size(0), Lp = a.size(1), C = out.size(2);
  const int64_t S = offsets ? static_cast<int64_t>(offsets->size()) - 1 : out.size(0);
  detail::dispatch_float(out.dtype(), "instant expansion", [&](auto tag) {
    using T = decltype(tag);
    auto rows = row_bases(const_cast<T*>(in.data<T>()), R, S, C);
    std::vector<const T*> crows(rows.begin(), rows.end());
    if (offsets)
      cpu::expand_segments(a.data<T>(), R, Lp, crows.data(), C, offsets->data(), S, C, out.data<T>());
    else
      cpu::expand_tokens(a.data<T>(), R, out.size(1), crows.data(), C, S, C, out.data<T>());
  });
}

void gram_add(Tensor& acc, const Tensor& t, const std::vector<int64_t>* offsets, bool token_axis, double alpha) {
  const int64_t n = acc.size(0), C = t.size(2);
  detail::dispatch_float(acc.dtype(), "instant calibration", [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data<T>();
    T* s = acc.data<T>();
    if (!token_axis) {
      cpu::gram_acc(true, C, t.size(0) * t.size(1), alpha, p, C, s);  // Σ_b x_bᵀ x_b = XᵀX
      return;
    }
    // x_b x_bᵀ into the leading L_b×L_b block (a shorter sample is its zero-extension)
    const int64_t S = offsets ? static_cast<int64_t>(offsets->size()) - 1 : t.size(0), L = t.size(1);
    for (int64_t b = 0; b < S; ++b) {
      const int64_t start = offsets ? (*offsets)[b] : b * L, Lb = offsets ? (*offsets)[b + 1] - start : L;
      if (Lb > 0) cpu::gram_acc(false, Lb, C, alpha, p + start * C, C, s, n);
    }
  });
}

void gram_finish(Tensor& acc, int64_t count) {
  const int64_t n = acc.size(0);
  detail::dispatch_float(acc.dtype(), "instant calibration", [&](auto tag) {
    using T = decltype(tag);
    T* s = acc.data<T>();
    const T inv = T(1) / static_cast<T>(count);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i; j < n; ++j) s[j * n + i] = s[i * n + j] = s[i * n + j] * inv;
  });
}

Tensor leading_rows(const Tensor& v, int64_t R, double scale) {
  const int64_t n = v.size(0);
  Tensor out = Tensor::empty({R, n}, v.dtype());
  detail::dispatch_float(v.dtype(), "instant basis", [&](auto tag) {
    using T = decltype(tag);
    const Tensor vc = backend::contiguous(v);
    const T* pv = vc.data<T>();
    T* pp = out.data<T>();
    for (int64_t r = 0; r < R; ++r)  // descending order: column n-1-r of v
      for (int64_t j = 0; j < n; ++j) pp[r * n + j] = static_cast<T>(pv[j * n + (n - 1 - r)] * scale);
  });
  return out;
}

}  // namespace

const LowrankKernels kCpuLowrank{project, expand, gram_add, gram_finish, leading_rows};

template <typename T>
constexpr LowrankHostKernels<T> host_table() {
  return {cpu::gemm_serial, cpu::project_tokens<T>, cpu::rows_dot_acc<T>, cpu::row_sums_acc<T>, cpu::gram_acc<T>};
}
const LowrankHostKernels<float> kCpuLowrankHostF32 = host_table<float>();
const LowrankHostKernels<double> kCpuLowrankHostF64 = host_table<double>();

}  // namespace lb::backend
