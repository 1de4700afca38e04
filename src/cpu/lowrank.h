// CPU kernels for thin low-rank projections along the token axis (INSTANT, docs/algorithms.md
// "Where the time goes"). A projection with R ≪ L rows touches every element of a large
// (B, L, C) tensor with only R multiply-adds, so it is memory-bound: these kernels read the
// big tensor exactly once, in its own (B, L, C) layout, parallel over samples and column
// tiles, with a register-blocked micro-kernel (R-row blocks × one column tile). The small
// side (R rows per sample) is addressed through per-row base pointers, so callers choose the
// layout of the projected tensors freely, e.g. (R, B, C): then the projected rows of all
// samples form one (R·B, C) matrix and the follow-up GEMMs fold the batch into one BLAS call.
#pragma once
#include <cstdint>

namespace lb::cpu {

// Projection: for every sample b and row r of a (R, L) (row-major),
//   out_rows[r][b·out_b_stride + c] = Σ_l a[r, l] · x[b, l, c]      (x: (B, L, C) contiguous)
// Rows r of `a` may go to different buffers (e.g. [P; Q] stacked, read g_y once).
// col_sums (B, C), when not null, receives Σ_l x[b, l, c] from the same pass (a bias
// gradient without a second read of x).
template <typename T>
void project_tokens(const T* a, int64_t R, int64_t L, const T* x, int64_t B, int64_t C,
                    T* const* out_rows, int64_t out_b_stride, T* col_sums = nullptr);

// Expansion (the adjoint): out[b, l, c] = Σ_r a[r, l] · in_rows[r][b·in_b_stride + c]
// (out: (B, L, C) contiguous, overwritten).
template <typename T>
void expand_tokens(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                   int64_t B, int64_t C, T* out);

// Variable-length samples back to back (a padding-free batch): sample b is rows
// offsets[b] .. offsets[b+1] of x (or out), (offsets[B], C) contiguous, and uses the first
// L_b = offsets[b+1] - offsets[b] ≤ L columns of a (R, L) — what its zero-extension to L
// tokens would give.
template <typename T>
void project_segments(const T* a, int64_t R, int64_t L, const T* x, const int64_t* offsets,
                      int64_t B, int64_t C, T* const* out_rows, int64_t out_b_stride,
                      T* col_sums = nullptr);
template <typename T>
void expand_segments(const T* a, int64_t R, int64_t L, const T* const* in_rows, int64_t in_b_stride,
                     const int64_t* offsets, int64_t B, int64_t C, T* out);

// c (n, n) += alpha · op(a) op(a)ᵀ with op(a) (n, k) (a (k, n) when trans): a Gram matrix,
// the whole square, by cpu::gemm (our AVX-512 kernel split over the OpenMP threads). BLAS
// syrk would do half the FLOPs, but only with OpenBLAS's AVX2 kernels here and its own thread
// pool, which fought the OpenMP workers (libgomp spin and sched_yield took half of a
// calibration's samples). ldc 0 means n.
template <typename T>
void gram_acc(bool trans, int64_t n, int64_t k, double alpha, const T* a, int64_t lda, T* c, int64_t ldc = 0);

// Serial helpers for per-image loops (callers parallelise over images):
// c[m, n] += Σ_k a[m, k] · b[n, k]   (a (M, K), b (N, K), c (M, N), all row-major)
template <typename T>
void rows_dot_acc(const T* a, int64_t M, const T* b, int64_t N, int64_t K, T* c);
// out[m] += Σ_k a[m, k]
template <typename T>
void row_sums_acc(const T* a, int64_t M, int64_t K, T* out);

}  // namespace lb::cpu
