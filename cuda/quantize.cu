// HOT's quantisation kernels on CUDA, the twins of src/cpu/quantize.cpp (src/backend/
// quantize.h): one thread per 16-point block — along a row (16 consecutive values) or down a
// column (16 rows of one column, so neighbouring threads read neighbouring columns) — running
// quant::fwht16_block and the quantisers of lb/core/quantize_formulas.h, each output element
// taking the Philox draw of its row-major index: the CPU's int8 levels, bit for bit.
// Maxima go through atomicMax on the float bits (non-negative floats order as integers), so
// they are exact too; the sums for SAWB (f64 here, f32 partials in the CPU's vector kernels)
// and the LQS errors differ from the CPU's at rounding level. The per-thread work is
// src/backend/quantize_blocks.h, which tests/unit/quantize_blocks_test.cpp runs on the CPU.
#include <cmath>
#include <cstring>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/quantize_formulas.h"
#include "src/backend/quantize.h"
#include "src/backend/quantize_blocks.h"

namespace lb::backend {
namespace {

__device__ inline void atomic_max_nonneg(float* address, float v) {
  atomicMax(reinterpret_cast<unsigned int*>(address), __float_as_uint(v));
}

// ---- along rows: thread t = (row r, block c0/16)

enum class RowsOp { Absmax, Quantize, Transform };

template <RowsOp kOp>
__global__ void rows_kernel(const float* x, int64_t rows, int64_t cols, float* row_absmax, float* absmax,
                            const float* row_inv, float inv, QuantParams p, int8_t* q, float* y) {
  LB_CUDA_FOR_EACH(t, quant_blocks::row_threads(rows, cols)) {
    int64_t r = 0, c0 = 0;
    float a[16];
    quant_blocks::row_block(x, cols, t, &r, &c0, a);
    if constexpr (kOp == RowsOp::Absmax) {
      const float m = quant_blocks::block_absmax(a);
      if (row_absmax) atomic_max_nonneg(row_absmax + r, m);
      if (absmax) atomic_max_nonneg(absmax, m);
    } else if constexpr (kOp == RowsOp::Quantize) {
      quant_blocks::quantize_row_block(a, r, c0, cols, row_inv ? row_inv[r] : inv, p, q);
    } else {
      for (int j = 0; j < 16; ++j) y[quant_blocks::row_output(r, c0, j, cols)] = a[j];
    }
  }
}

// Per-row scale and inverse from each row's absmax (in place of the absmax).
__global__ void row_scales_kernel(float* absmax_to_inv, float* row_scale, int64_t rows, int qmax) {
  LB_CUDA_FOR_EACH(r, rows) {
    const float m = absmax_to_inv[r];
    row_scale[r] = quant::scale_from_absmax(m, qmax);
    absmax_to_inv[r] = quant::inv_scale_from_absmax(m, qmax);
  }
}

template <RowsOp kOp>
void launch_rows(const Tensor& x, float* row_absmax, float* absmax, const float* row_inv, float inv,
                 const QuantParams& p, int8_t* q, float* y) {
  const int64_t rows = x.size(0), cols = x.size(1), n = quant_blocks::row_threads(rows, cols);
  if (n == 0) return;
  rows_kernel<kOp><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
      x.data<float>(), rows, cols, row_absmax, absmax, row_inv, inv, p, q, y);
  LB_CUDA_CHECK_LAUNCH("rows_kernel");
}

// A zeroed f32 scratch of n values on x's device (atomic maxima start at 0).
Tensor zeroed(int64_t n, const Tensor& like) {
  Tensor t = Tensor::empty({n}, DType::F32, like.device(), MemTag::Workspace);
  LB_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), cuda::stream(like.device().index)));
  return t;
}

template <typename T>
T read_back(const void* device_value, const Tensor& like) {
  T v{};
  const cudaStream_t s = cuda::stream(like.device().index);
  LB_CUDA_CHECK(cudaMemcpyAsync(&v, device_value, sizeof v, cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));
  return v;
}

float rows_absmax(const Tensor& x) {
  Tensor m = zeroed(1, x);
  launch_rows<RowsOp::Absmax>(x, nullptr, m.data<float>(), nullptr, 0.f, {}, nullptr, nullptr);
  return read_back<float>(m.raw_data(), x);
}

void rows_quantize(const Tensor& x, float inv, const QuantParams& p, Tensor& q) {
  launch_rows<RowsOp::Quantize>(x, nullptr, nullptr, nullptr, inv, p, q.data<int8_t>(), nullptr);
}

void rows_quantize_per_row(const Tensor& x, const QuantParams& p, Tensor& q, Tensor& row_scale) {
  const int64_t rows = x.size(0);
  Tensor inv = zeroed(rows, x);
  launch_rows<RowsOp::Absmax>(x, inv.data<float>(), nullptr, nullptr, 0.f, {}, nullptr, nullptr);
  if (rows > 0) {
    row_scales_kernel<<<cuda::blocks_for(rows), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
        inv.data<float>(), row_scale.data<float>(), rows, p.qmax);
    LB_CUDA_CHECK_LAUNCH("row_scales_kernel");
  }
  launch_rows<RowsOp::Quantize>(x, nullptr, nullptr, inv.data<float>(), 0.f, p, q.data<int8_t>(), nullptr);
}

void rows(const Tensor& x, Tensor& y) {
  launch_rows<RowsOp::Transform>(x, nullptr, nullptr, nullptr, 0.f, {}, nullptr, y.data<float>());
}

// ---- along columns: thread t = (block b of 16 rows, column c)

enum class ColsOp { Stats, Quantize, Transform };

template <ColsOp kOp>
__global__ void cols_kernel(const float* x, int64_t rows, int64_t cols, HadamardKeep keep, float inv, QuantParams p,
                            int8_t* q, float* y, float* absmax, double* sums) {
  float m = 0.f;
  double sq = 0.0, ab = 0.0;
  LB_CUDA_FOR_EACH(t, quant_blocks::col_threads(rows, cols)) {
    int64_t b = 0, c = 0;
    float a[16];
    quant_blocks::col_block(x, rows, cols, t, &b, &c, a);
    for (int j = 0; j < keep.r; ++j) {
      const float v = a[keep.idx[j]];
      const int64_t e = quant_blocks::col_output(b, j, keep.r, cols, c);
      if constexpr (kOp == ColsOp::Stats) {
        m = fmaxf(m, fabsf(v));
        sq += static_cast<double>(v) * v;
        ab += fabsf(v);
      } else if constexpr (kOp == ColsOp::Quantize) {
        q[e] = quant_blocks::quantize_one(v, inv, p, static_cast<uint64_t>(e));
      } else {
        y[e] = v;
      }
    }
  }
  if constexpr (kOp == ColsOp::Stats) {
    __shared__ float fmax_shared[cuda::kWarps];
    __shared__ double sum_shared[cuda::kWarps];
    m = cuda::block_reduce<float, true>(m, fmax_shared);
    sq = cuda::block_reduce<double, false>(sq, sum_shared);
    ab = cuda::block_reduce<double, false>(ab, sum_shared);
    if (threadIdx.x == 0) {
      atomic_max_nonneg(absmax, m);
      atomicAdd(sums, sq);
      atomicAdd(sums + 1, ab);
    }
  }
}

template <ColsOp kOp>
void launch_cols(const Tensor& x, const HadamardKeep& keep, float inv, const QuantParams& p, int8_t* q, float* y,
                 float* absmax, double* sums) {
  const int64_t rows = x.size(0), cols = x.size(1), n = quant_blocks::col_threads(rows, cols);
  if (n == 0) return;
  cols_kernel<kOp><<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
      x.data<float>(), rows, cols, keep, inv, p, q, y, absmax, sums);
  LB_CUDA_CHECK_LAUNCH("cols_kernel");
}

TensorStats cols_stats(const Tensor& x, const HadamardKeep& keep) {
  // One scratch: the absmax as f32 bits, then (aligned) the two f64 sums.
  Tensor scratch = zeroed(6, x);
  float* absmax = scratch.data<float>();
  double* sums = reinterpret_cast<double*>(scratch.data<float>() + 2);
  launch_cols<ColsOp::Stats>(x, keep, 0.f, {}, nullptr, nullptr, absmax, sums);
  float host[6];
  const cudaStream_t s = cuda::stream(x.device().index);
  LB_CUDA_CHECK(cudaMemcpyAsync(host, scratch.raw_data(), sizeof host, cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));
  TensorStats st;
  st.absmax = host[0];
  std::memcpy(&st.sum_sq, host + 2, sizeof(double));
  std::memcpy(&st.sum_abs, host + 4, sizeof(double));
  st.count = (x.size(0) + 15) / 16 * keep.r * x.size(1);  // padding rows included, as on the CPU
  return st;
}

void cols_quantize(const Tensor& x, const HadamardKeep& keep, float inv, const QuantParams& p, Tensor& q) {
  launch_cols<ColsOp::Quantize>(x, keep, inv, p, q.data<int8_t>(), nullptr, nullptr, nullptr);
}

void cols(const Tensor& x, const HadamardKeep& keep, Tensor& y) {
  launch_cols<ColsOp::Transform>(x, keep, 0.f, {}, nullptr, y.data<float>(), nullptr, nullptr);
}

// The CPU reference's composition (src/cpu/quantize.cpp, ref::fwht16_dual_quantize).
DualScales dual_quantize(const Tensor& x, const QuantParams& prow, bool per_row, Tensor& q_rows,
                              Tensor& row_scale, const HadamardKeep& keep, const QuantParams& pcol, Tensor& q_cols) {
  DualScales s;
  if (per_row) {
    rows_quantize_per_row(x, prow, q_rows, row_scale);
  } else {
    const float m = rows_absmax(x);
    s.rows = quant::scale_from_absmax(m, prow.qmax);
    rows_quantize(x, quant::inv_scale_from_absmax(m, prow.qmax), prow, q_rows);
  }
  const TensorStats st = cols_stats(x, keep);
  s.cols = quant::scale_from_absmax(st.absmax, pcol.qmax);
  cols_quantize(x, keep, quant::inv_scale_from_absmax(st.absmax, pcol.qmax), pcol, q_cols);
  return s;
}

__global__ void l2_error_kernel(const int8_t* q, const float* row_scale, float scale, const float* t, int64_t rows,
                                int64_t n, double* out) {
  double e = 0.0;
  LB_CUDA_FOR_EACH(i, rows * n) {
    const double s = row_scale ? row_scale[i / n] : scale;
    const double d = q[i] * s - t[i];
    e += d * d;
  }
  __shared__ double shared[cuda::kWarps];
  e = cuda::block_reduce<double, false>(e, shared);
  if (threadIdx.x == 0) atomicAdd(out, e);
}

double dequantized_l2_error(const Tensor& q, const Tensor& row_scale, float scale, const Tensor& t) {
  const int64_t rows = q.size(0), n = q.size(1);
  Tensor acc = zeroed(2, q);
  if (rows * n > 0) {
    l2_error_kernel<<<cuda::blocks_for(rows * n), cuda::kThreads, 0, cuda::stream(q.device().index)>>>(
        q.data<int8_t>(), data_or_null<float>(row_scale), scale, t.data<float>(), rows, n,
        reinterpret_cast<double*>(acc.raw_data()));
    LB_CUDA_CHECK_LAUNCH("l2_error_kernel");
  }
  return std::sqrt(read_back<double>(acc.raw_data(), q));
}

// ---- no transform: one thread per element (draw i for element i, as the CPU's quantize)

__global__ void absmax_kernel(const float* x, int64_t n, float* out) {
  float m = 0.f;
  LB_CUDA_FOR_EACH(i, n) m = ::fmaxf(m, ::fabsf(x[i]));
  __shared__ float shared[cuda::kWarps];
  m = cuda::block_reduce<float, true>(m, shared);
  if (threadIdx.x == 0) atomic_max_nonneg(out, m);
}

__global__ void quantize_kernel(const float* x, int64_t n, float inv, QuantParams p, int8_t* q) {
  LB_CUDA_FOR_EACH(i, n) q[i] = quant_blocks::quantize_one(x[i], inv, p, static_cast<uint64_t>(i));
}

__global__ void dequantize_kernel(const int8_t* q, int64_t n, float scale, float* y) {
  LB_CUDA_FOR_EACH(i, n) y[i] = static_cast<float>(q[i]) * scale;
}

float absmax(const Tensor& x) {
  Tensor m = zeroed(1, x);
  const int64_t n = x.numel();
  if (n > 0) {
    absmax_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(x.data<float>(), n,
                                                                                               m.data<float>());
    LB_CUDA_CHECK_LAUNCH("absmax_kernel");
  }
  return read_back<float>(m.raw_data(), x);
}

void quantize(const Tensor& x, float inv, const QuantParams& p, Tensor& q) {
  const int64_t n = x.numel();
  if (n == 0) return;
  quantize_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(x.device().index)>>>(
      x.data<float>(), n, inv, p, q.data<int8_t>());
  LB_CUDA_CHECK_LAUNCH("quantize_kernel");
}

void dequantize(const Tensor& q, float scale, Tensor& y) {
  const int64_t n = q.numel();
  if (n == 0) return;
  dequantize_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream(q.device().index)>>>(
      q.data<int8_t>(), n, scale, y.data<float>());
  LB_CUDA_CHECK_LAUNCH("dequantize_kernel");
}

}  // namespace

const QuantizeKernels kCudaQuantize{rows_absmax, rows_quantize, rows_quantize_per_row, rows,
                                    cols_stats,  cols_quantize, cols,                  dual_quantize,
                                    dequantized_l2_error,       absmax,                quantize,
                                    dequantize};

}  // namespace lb::backend
