// Internal: the byte-moving kernels of concat and index_select of one device (see
// backend.h). They see tensors as rows of bytes (any dtype); only index_add_rows, the
// index_select backward, is arithmetic (one float dtype). Indices are contiguous i32/i64,
// already checked against the axis size (EmbeddingKernels::first_bad_index).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

struct ShapeKernels {
  // concat's placement: x contiguous, seen as `outer` runs of run_bytes; run r goes to byte
  // dst_offset of row r of out, whose rows are out_row_bytes long.
  void (*place_rows)(const Tensor& x, Tensor& out, int64_t outer, int64_t run_bytes, int64_t out_row_bytes,
                     int64_t dst_offset);
  // out (outer, n, row_bytes) = x (outer, size, row_bytes) at the n indices along the middle axis.
  void (*gather_rows)(const Tensor& x, const Tensor& index, Tensor& out, int64_t outer, int64_t size,
                      int64_t row_bytes);
  // gx (outer, size, inner), zeroed by the caller, += g (outer, n, inner) scattered by the
  // indices; repeated indices accumulate.
  void (*index_add_rows)(const Tensor& g, const Tensor& index, Tensor& gx, int64_t outer, int64_t size,
                         int64_t inner);
};

// src/cpu/shape_ops.cpp, cuda/shape_ops.cu
LB_KERNEL_TABLES(ShapeKernels, shape_kernels, kCpuShapeOps, kCudaShapeOps, "concat / index_select")

}  // namespace lb::backend
