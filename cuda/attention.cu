// CUDA fused attention kernels, the twins of src/cpu/attention.cpp (src/backend/attention.h).
// The CPU keeps one (b, h) tile's scores in L2; here the scores of all tiles are one
// (B, heads, Tq, Tk) workspace, made and consumed by batched cuBLAS GEMMs over (b, h) that
// read q, k, v and write the context through (B, heads, T, d) views of the (B, T, H)
// tensors (no copies). Between the GEMMs, one block per probability row: the masked
// softmax (fast_exp, as the CPU), its max and 1/sum, and dropout drawing the same Philox
// values as the CPU (philox_draw). The backward recomputes P from the saved statistics.
// GEMMs here have no alpha, so the 1/√d scale is applied to the scores in the row kernel
// (the CPU folds it into the GEMM): the two agree to rounding.
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "lb/core/philox.h"
#include "lb/core/views.h"
#include "src/backend/attention.h"
#include "src/backend/copy.h"
#include "src/backend/fast_exp.h"
#include "src/backend/gemm.h"

namespace lb::backend {
namespace {

using cuda::block_reduce;
using cuda::kWarps;
using cuda::row_blocks;

// What the row kernels need of the geometry, by value.
struct RowGeom {
  int64_t heads, Tq, Tk;
  int64_t ms0, ms1, ms2, ms3;  // mask strides over (B, heads, Tq, Tk)
  float p;
  double scale, keep_scale;
  uint64_t subsequence, offset;
  uint32_t key0, key1;
  int64_t tile_bytes;
};

RowGeom row_geom(const AttentionGeom& g) {
  RowGeom r{g.heads, g.Tq, g.Tk, 0, 0, 0, 0, g.p, g.scale, g.keep_scale, g.subsequence, g.offset,
            static_cast<uint32_t>(g.seed), static_cast<uint32_t>(g.seed >> 32), g.tile_bytes};
  if (!g.ms.empty()) {
    r.ms0 = g.ms[0];
    r.ms1 = g.ms[1];
    r.ms2 = g.ms[2];
    r.ms3 = g.ms[3];
  }
  return r;
}

// Row `row` = (tile, i) of the probabilities, tile = b·heads + h: its mask row.
template <typename T>
__device__ const T* mask_row(const RowGeom& g, const T* mask, int64_t row) {
  const int64_t i = row % g.Tq, tile = row / g.Tq;
  return mask + (tile / g.heads) * g.ms0 + (tile % g.heads) * g.ms1 + i * g.ms2;
}

// Element e of the (B, heads, Tq, Tk) probabilities is kept by dropout.
__device__ inline bool kept(const RowGeom& g, int64_t e) {
  return philox_uniform(philox_draw(g.offset + static_cast<uint64_t>(e), g.subsequence, g.key0, g.key1)) > g.p;
}

// S (rows, Tk) holds q kᵀ; each row becomes P = softmax(scale·S + mask), then (p > 0) P ⊙
// keep / (1-p). stats (rows, 2) = the row max and 1/sum.
template <typename T>
__global__ void softmax_rows_kernel(RowGeom g, T* S, const T* mask, T* stats, int64_t rows) {
  __shared__ T shared[kWarps];
  const T kNegInf = -static_cast<T>(INFINITY);
  const T scale = static_cast<T>(g.scale), ks = static_cast<T>(g.keep_scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T* sr = S + r * g.Tk;
    const T* m = mask ? mask_row(g, mask, r) : nullptr;
    T mx = kNegInf;
    for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
      const T z = m ? sr[j] * scale + m[j * g.ms3] : sr[j] * scale;
      sr[j] = z;
      mx = z > mx ? z : mx;
    }
    mx = block_reduce<T, true>(mx, shared);
    if (mx == kNegInf) {  // fully masked row: zeros, zero gradient
      for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) sr[j] = T(0);
      if (threadIdx.x == 0) {
        stats[2 * r] = mx;
        stats[2 * r + 1] = T(0);
      }
      continue;
    }
    T s = 0;
    for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
      const T e = detail::fast_exp(sr[j] - mx);
      sr[j] = e;
      s += e;
    }
    s = block_reduce<T, false>(s, shared);
    const T inv = T(1) / s;
    for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
      const T pr = sr[j] * inv;
      sr[j] = g.p > 0 ? (kept(g, r * g.Tk + j) ? pr * ks : T(0)) : pr;
    }
    if (threadIdx.x == 0) {
      stats[2 * r] = mx;
      stats[2 * r + 1] = inv;
    }
  }
}

// The keep bits, one thread per byte of a tile (8 elements, which may span rows).
__global__ void keep_bits_kernel(RowGeom g, uint8_t* bits, int64_t tiles) {
  const int64_t per_tile = g.Tq * g.Tk;
  LB_CUDA_FOR_EACH(i, tiles * g.tile_bytes) {
    const int64_t tile = i / g.tile_bytes, byte = i % g.tile_bytes;
    uint8_t b = 0;
    for (int k = 0; k < 8; ++k) {
      const int64_t e = 8 * byte + k;
      if (e >= per_tile) break;
      b |= static_cast<uint8_t>(kept(g, tile * per_tile + e) << k);
    }
    bits[i] = b;
  }
}

__device__ inline bool bit_of(const RowGeom& g, const uint8_t* bits, int64_t row, int64_t j) {
  const int64_t e = (row % g.Tq) * g.Tk + j;
  return (bits[(row / g.Tq) * g.tile_bytes + (e >> 3)] >> (e & 7)) & 1;
}

// Backward, per row: S (q kᵀ) -> P from the saved stats; Pd = P ⊙ keep / (1-p) into Pd
// (when dropout ran; else P is Pd).
template <typename T>
__global__ void probs_again_kernel(RowGeom g, T* S, const T* mask, const T* stats, const uint8_t* bits, T* Pd,
                                   int64_t rows) {
  const T kNegInf = -static_cast<T>(INFINITY);
  const T scale = static_cast<T>(g.scale), ks = static_cast<T>(g.keep_scale);
  LB_CUDA_FOR_EACH(e, rows * g.Tk) {
    const int64_t r = e / g.Tk, j = e % g.Tk;
    const T mx = stats[2 * r], inv = stats[2 * r + 1];
    T pr = 0;
    if (mx != kNegInf) {
      const T z = mask ? S[e] * scale + mask_row(g, mask, r)[j * g.ms3] : S[e] * scale;
      pr = detail::fast_exp(z - mx) * inv;
    }
    S[e] = pr;
    if (bits) Pd[e] = bit_of(g, bits, r, j) ? pr * ks : T(0);
  }
}

// Backward, per row: dP (g vᵀ) -> dS = P ⊙ (dP' - Σ dP' ⊙ P) with dP' = dP ⊙ keep / (1-p);
// dmask (when wanted) = dS, and dP := scale · dS for the dq and dk GEMMs.
template <typename T>
__global__ void softmax_grad_rows_kernel(RowGeom g, const T* P, const uint8_t* bits, T* dP, T* dmask, int64_t rows) {
  __shared__ T shared[kWarps];
  const T scale = static_cast<T>(g.scale), ks = static_cast<T>(g.keep_scale);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* pr = P + r * g.Tk;
    T* dr = dP + r * g.Tk;
    T s = 0;
    for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
      if (bits) dr[j] = bit_of(g, bits, r, j) ? dr[j] * ks : T(0);
      s += dr[j] * pr[j];
    }
    s = block_reduce<T, false>(s, shared);
    for (int64_t j = threadIdx.x; j < g.Tk; j += blockDim.x) {
      const T ds = pr[j] * (dr[j] - s);
      if (dmask) dmask[r * g.Tk + j] = ds;
      dr[j] = ds * scale;
    }
  }
}

// x (B, T, H) as (B, heads, T, d): the per-head matrices, rows H apart (a view).
Tensor heads_view(const Tensor& x, int64_t heads) {
  const int64_t H = x.size(2);
  return views::transpose(backend::reshape(x, {x.size(0), x.size(1), heads, H / heads}), 1, 2);
}

void forward(const AttentionGeom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
             Tensor& out, Tensor& stats, Tensor& bits) {
  const RowGeom rg = row_geom(g);
  const int64_t rows = g.B * g.heads * g.Tq, tiles = g.B * g.heads;
  const cudaStream_t s = cuda::stream(out.device().index);
  const GemmKernels& gemm = gemm_kernels(out.device());
  Tensor S = Tensor::empty({g.B, g.heads, g.Tq, g.Tk}, out.dtype(), out.device(), MemTag::Workspace);
  gemm.gemm_into(S, heads_view(q, g.heads), false, heads_view(k, g.heads), true, {g.B, g.heads}, false);
  detail::dispatch_float(out.dtype(), "attention on CUDA", [&](auto tag) {
    using T = decltype(tag);
    softmax_rows_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, s>>>(rg, S.data<T>(), data_or_null<T>(mask),
                                                                       stats.data<T>(), rows);
  });
  LB_CUDA_CHECK_LAUNCH("softmax_rows_kernel");
  if (bits.defined()) {
    keep_bits_kernel<<<cuda::blocks_for(tiles * g.tile_bytes), cuda::kThreads, 0, s>>>(rg, bits.data<uint8_t>(),
                                                                                       tiles);
    LB_CUDA_CHECK_LAUNCH("keep_bits_kernel");
  }
  Tensor ov = heads_view(out, g.heads);
  gemm.gemm_into(ov, S, false, heads_view(v, g.heads), false, {g.B, g.heads}, false);
}

void backward(const AttentionGeom& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
              const Tensor& stats, const Tensor& bits, const Tensor& grad, Tensor& dq, Tensor& dk, Tensor& dv,
              Tensor& dmask) {
  const RowGeom rg = row_geom(g);
  const int64_t rows = g.B * g.heads * g.Tq;
  const Shape batch{g.B, g.heads}, scores{g.B, g.heads, g.Tq, g.Tk};
  const cudaStream_t s = cuda::stream(grad.device().index);
  const GemmKernels& gemm = gemm_kernels(grad.device());
  const Tensor qh = heads_view(q, g.heads), kh = heads_view(k, g.heads), vh = heads_view(v, g.heads);
  const Tensor gh = heads_view(grad, g.heads);
  Tensor P = Tensor::empty(scores, grad.dtype(), grad.device(), MemTag::Workspace);
  Tensor Pd = bits.defined() ? Tensor::empty(scores, grad.dtype(), grad.device(), MemTag::Workspace) : P;
  gemm.gemm_into(P, qh, false, kh, true, batch, false);
  detail::dispatch_float(grad.dtype(), "attention backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    probs_again_kernel<T><<<cuda::blocks_for(rows * g.Tk), cuda::kThreads, 0, s>>>(
        rg, P.data<T>(), data_or_null<T>(mask), stats.data<T>(), data_or_null<uint8_t>(bits), Pd.data<T>(), rows);
  });
  LB_CUDA_CHECK_LAUNCH("probs_again_kernel");
  if (dv.defined()) {  // dv_bh = Pdᵀ g_bh
    Tensor dvh = heads_view(dv, g.heads);
    gemm.gemm_into(dvh, Pd, true, gh, false, batch, false);
  }
  if (!dq.defined() && !dk.defined() && !dmask.defined()) return;
  Tensor dP = bits.defined() ? Pd : Tensor::empty(scores, grad.dtype(), grad.device(), MemTag::Workspace);
  gemm.gemm_into(dP, gh, false, vh, true, batch, false);  // dPd = g_bh v_bhᵀ
  detail::dispatch_float(grad.dtype(), "attention backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    softmax_grad_rows_kernel<T><<<row_blocks(rows), cuda::kThreads, 0, s>>>(
        rg, P.data<T>(), data_or_null<uint8_t>(bits), dP.data<T>(), data_or_null<T>(dmask), rows);
  });
  LB_CUDA_CHECK_LAUNCH("softmax_grad_rows_kernel");
  if (dq.defined()) {  // dq_bh = s dS k_bh
    Tensor dqh = heads_view(dq, g.heads);
    gemm.gemm_into(dqh, dP, false, kh, false, batch, false);
  }
  if (dk.defined()) {  // dk_bh = s dSᵀ q_bh
    Tensor dkh = heads_view(dk, g.heads);
    gemm.gemm_into(dkh, dP, true, qh, false, batch, false);
  }
}

}  // namespace

const AttentionKernels kCudaAttention{forward, backward};

}  // namespace lb::backend
