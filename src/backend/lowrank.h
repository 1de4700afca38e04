// Internal: INSTANT's low-rank kernels of one device (see backend.h), for the strategy in
// src/nn/backward/instant.cpp: token-axis projections and their adjoint, Gram statistics,
// and the basis taken from an eigendecomposition.
//
// Layouts: x is (B, L, C) contiguous, or a padding-free (1, N, C) holding S sequences back to
// back (`offsets`: S + 1 host offsets); the projected tensor is (R, S, C) contiguous (row r
// of sample s at [r, s, :]), so the rows of all samples form one (R·S, C) matrix. A sample of
// L_s tokens uses the first L_s columns of the (R, Lp) projection: what its zero extension
// would give.
//
// The CPU table (src/cpu/lowrank.cpp) runs the memory-bound register-blocked kernels of
// src/cpu/lowrank.h; the CUDA table (cuda/lowrank.cpp) runs the generic versions below,
// written with tensor views and the device's GEMM table (batched cuBLAS on a GPU). The
// generic versions work on any device, so the CPU tests check them against the CPU kernels.
#pragma once
#include <type_traits>
#include <vector>

#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct LowrankKernels {
  // out (R, S, C) = a[:, :L_s] x_s per sample; bias (C), when defined, = the sum of every
  // row of x (a bias gradient from the same pass over x).
  void (*project)(const Tensor& a, const Tensor& x, const std::vector<int64_t>* offsets, Tensor& out,
                  Tensor& bias);
  // out (x's layout, overwritten) = a[:, :L_s]ᵀ in[:, s, :] per sample; in (R, S, C).
  void (*expand)(const Tensor& a, const Tensor& in, const std::vector<int64_t>* offsets, Tensor& out);
  // acc (n, n) += alpha · Σ_s t_s t_sᵀ into its leading L_s × L_s block (token axis), or
  // alpha · TᵀT with T the rows of t as (rows, C) (channel axis). acc and t in one dtype.
  void (*gram_add)(Tensor& acc, const Tensor& t, const std::vector<int64_t>* offsets, bool token_axis,
                   double alpha);
  // acc := acc / count (the mean of `count` batches' Grams), symmetric.
  void (*gram_finish)(Tensor& acc, int64_t count);
  // (R, n), row r = column n-1-r of v (n, n) times scale: the leading eigenvectors of an
  // ascending eigendecomposition, as projection rows.
  Tensor (*leading_rows)(const Tensor& v, int64_t R, double scale);
};

// src/cpu/lowrank.cpp, cuda/lowrank.cpp
LB_KERNEL_TABLES(LowrankKernels, lowrank_tables, kCpuLowrank, kCudaLowrank, "instant low-rank kernels")

// Tests only: while set, CPU tensors run the generic versions too, so the CPU suite drives the
// strategy through the code path a GPU takes (src/backend/lowrank_generic.cpp).
void set_generic_lowrank_on_cpu(bool on);
bool generic_lowrank_on_cpu();
extern const LowrankKernels kGenericLowrank;
inline const LowrankKernels& lowrank_kernels(Device d) {
  return d.is_cpu() && generic_lowrank_on_cpu() ? kGenericLowrank : lowrank_tables(d);
}

// The CPU's serial building blocks on host pointers (the contracts of src/cpu/lowrank.h and
// src/cpu/gemm_serial.h), for INSTANT's loops that run on the CPU image by image (the conv
// image layout, calibration from im2col columns): called from the strategy's own OpenMP loop,
// except gram_acc, which splits its GEMM over the threads itself.
template <typename T>
struct LowrankHostKernels {
  // c = alpha op(a) op(b) + beta c, single-threaded (cblas argument order)
  void (*gemm_serial)(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                      const T* b, int64_t ldb, T beta, T* c, int64_t ldc);
  void (*project_tokens)(const T* a, int64_t R, int64_t L, const T* x, int64_t B, int64_t C, T* const* out_rows,
                         int64_t out_b_stride, T* col_sums);
  void (*rows_dot_acc)(const T* a, int64_t M, const T* b, int64_t N, int64_t K, T* c);
  void (*row_sums_acc)(const T* a, int64_t M, int64_t K, T* out);
  void (*gram_acc)(bool trans, int64_t n, int64_t k, double alpha, const T* a, int64_t lda, T* c, int64_t ldc);
};
// src/cpu/lowrank.cpp
extern const LowrankHostKernels<float> kCpuLowrankHostF32;
extern const LowrankHostKernels<double> kCpuLowrankHostF64;
template <typename T>
const LowrankHostKernels<T>& lowrank_host_kernels() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "lowrank host kernels: f32 or f64");
  if constexpr (std::is_same_v<T, float>)
    return kCpuLowrankHostF32;
  else
    return kCpuLowrankHostF64;
}

// The device-agnostic versions (src/backend/lowrank_generic.cpp).
namespace generic_lowrank {
void project(const Tensor& a, const Tensor& x, const std::vector<int64_t>* offsets, Tensor& out, Tensor& bias);
void expand(const Tensor& a, const Tensor& in, const std::vector<int64_t>* offsets, Tensor& out);
void gram_add(Tensor& acc, const Tensor& t, const std::vector<int64_t>* offsets, bool token_axis, double alpha);
void gram_finish(Tensor& acc, int64_t count);
Tensor leading_rows(const Tensor& v, int64_t R, double scale);
}  // namespace generic_lowrank

}  // namespace lb::backend
