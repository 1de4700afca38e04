// Internal: the GEMM kernels of one device (see backend.h), and the operand layout analysis
// both devices share (src/backend/gemm.cpp): which stored orientation and leading dimension
// each operand is read with, its batch strides, and the checked problem sizes.
//
// gemm_into's contract (the CPU one documents it in full, src/cpu/gemm.h): c[i] (+)=
// op(a[i]) op(b[i]) over the broadcast batch shape `batch`; c row-major in its last two dims;
// when c has fewer (or size-1) batch dims than `batch`, the products over those dims are
// summed into c. Transposed views are read as they are (no copies).
#pragma once
#include "lb/core/tensor.h"
#include "src/backend/backend.h"

namespace lb::backend {

// One operand's per-batch matrix as BLAS sees it: stored row-major (rows x cols, leading
// dimension ld), used transposed when `trans`. Batch strides are in elements, aligned with
// the full batch shape (0 on broadcast dims).
struct MatDesc {
  Tensor t;  // the tensor actually read (the input, or a contiguous copy of it on its device)
  int64_t rows = 0, cols = 0, ld = 1;
  bool trans = false;
  Shape batch_strides;
};

// A gemm_into call with its operands described: C (M x N per batch element, leading
// dimension ldc) = op(A) op(B) with inner size K, over nbatch elements.
struct GemmProblem {
  MatDesc A, B;
  int64_t M = 0, N = 0, K = 0, ldc = 1, nbatch = 1;
  Shape c_strides;  // c's batch strides (0 on the dims summed into c)
};

// Describes c = op(a) op(b) over `batch`, checking the shapes, c's layout and that every
// size fits BLAS's 32-bit integers (when M and N are not 0). An operand strided in both of
// its last two dims is copied once, contiguous, on its device.
GemmProblem describe_gemm(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                          bool trans_b, const Shape& batch);

// True when the batch dims, walked innermost first, continue a run of `inner`-element
// blocks (so batch and the matrix rows fuse into one strided axis).
bool chains(const Shape& strides, const Shape& batch, int64_t inner);
// True when every batch dim of size > 1 has stride 0.
bool all_broadcast(const Shape& strides, const Shape& batch);

struct GemmKernels {
  void (*gemm_into)(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                    const Shape& batch, bool accumulate);
  // True when a bf16 operand beside an f32 one is read as it is (no widening): then an op
  // holding a bf16 copy of an input should pass the copy (half the bytes, same product).
  bool (*reads_bf16)();
};

// src/cpu/gemm.cpp, cuda/gemm.cu
LB_KERNEL_TABLES(GemmKernels, gemm_kernels, kCpuGemm, kCudaGemm, "matmul")

}  // namespace lb::backend
