// Internal: the embedding kernels of one device (see backend.h). Indices are contiguous i32
// or i64; weight (V, D), out (n, D) and the gradients contiguous, of one float dtype.
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct EmbeddingKernels {
  // The flat position of the first index outside [0, V) (its value in *value), or -1.
  int64_t (*first_bad_index)(const Tensor& indices, int64_t V, int64_t* value);
  // out[k] = weight[indices[k]]
  void (*gather)(const Tensor& indices, const Tensor& weight, Tensor& out);
  // dweight (zeros, (V, D)) [indices[k]] += dout[k] for every k whose index is not padding_idx
  void (*scatter_add)(const Tensor& dout, const Tensor& indices, int64_t padding_idx, Tensor& dweight);
  // The row-sparse form of the same gradient (lb/autograd/row_sparse_grad.h); nullptr where
  // the device has none. touched_rows: the distinct indices but padding_idx, ascending, as
  // (K,) i64. scatter_add_rows: values (zeros, (K, D)) [k] += dout[j] for every j whose index is
  // rows[k], in index order, so each row sums what scatter_add sums, bit for bit.
  Tensor (*touched_rows)(const Tensor& indices, int64_t V, int64_t padding_idx);
  void (*scatter_add_rows)(const Tensor& dout, const Tensor& indices, const Tensor& rows, int64_t V, Tensor& values);
};

// src/cpu/embedding.cpp, cuda/embedding.cu
LB_KERNEL_TABLES(EmbeddingKernels, embedding_kernels, kCpuEmbedding, kCudaEmbedding, "embedding")

}  // namespace lb::backend
