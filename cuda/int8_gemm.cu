// The integer GEMM on CUDA, the twin of src/cpu/int8_gemm.cpp (src/backend/int8_gemm.h):
// cuBLAS's int8 GEMM with int32 accumulation (cublasGemmEx, CUDA_R_8I inputs, CUDA_R_32I
// output, CUBLAS_COMPUTE_32I: the tensor-core IMMA path on Hopper where the layout allows),
// then a dequantising epilogue with the CPU's float operations (float(sum) · (row_scale ·
// alpha), then the add), so both devices give the same f32 values. Where cuBLAS declines a
// layout (int8 GEMMs have alignment and transpose restrictions), a shared-memory tiled kernel
// computes the same exact int32 sums.
#include <atomic>
#include <cstdio>

#include "cuda/cublas.h"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "src/backend/int8_gemm.h"

namespace lb::backend {
namespace {

constexpr int kTile = 16;

// C (M, N) row-major int32 = op(A) op(B), exact.
__global__ void int8_gemm_tiled(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                                int64_t lda, const int8_t* B, int64_t ldb, int32_t* C) {
  __shared__ int32_t a_tile[kTile][kTile + 1];
  __shared__ int32_t b_tile[kTile][kTile + 1];
  const int64_t row = static_cast<int64_t>(blockIdx.y) * kTile + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
  int32_t acc = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kTile) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    a_tile[threadIdx.y][threadIdx.x] =
        row < M && ka < K ? (trans_a ? A[ka * lda + row] : A[row * lda + ka]) : 0;
    b_tile[threadIdx.y][threadIdx.x] =
        kb < K && col < N ? (trans_b ? B[col * ldb + kb] : B[kb * ldb + col]) : 0;
    __syncthreads();
    for (int k = 0; k < kTile; ++k) acc += a_tile[threadIdx.y][k] * b_tile[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

__global__ void dequantize_epilogue(const int32_t* C, int64_t M, int64_t N, float* out, int64_t ldo,
                                    const float* row_scale, float alpha, bool accumulate) {
  LB_CUDA_FOR_EACH(e, M * N) {
    const int64_t m = e / N, n = e % N;
    // Rounded multiplies and add, never fused: the CPU's vector epilogue rounds each.
    const float s = __fmul_rn(row_scale ? row_scale[m] : 1.f, alpha);
    const float y = __fmul_rn(static_cast<float>(C[e]), s);
    float* o = out + m * ldo + n;
    *o = accumulate ? __fadd_rn(*o, y) : y;
  }
}

// Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: operands swapped. Returns
// false when cuBLAS declines the problem (then nothing was written).
bool cublas_int8(int device, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const int8_t* A,
                 int64_t lda, const int8_t* B, int64_t ldb, int32_t* C) {
  const int32_t one = 1, zero = 0;
  const cublasStatus_t st =
      cuda::cublas().cublasGemmEx(cuda::cublas_handle(device), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                   static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one, B, CUDA_R_8I,
                   static_cast<int>(ldb), A, CUDA_R_8I, static_cast<int>(lda), &zero, C, CUDA_R_32I, static_cast<int>(N),
                   CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT);
  if (st == CUBLAS_STATUS_SUCCESS) return true;
  if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_INVALID_VALUE)
    cuda::fail_cublas(st, "cublasGemmEx (int8)", __FILE__, __LINE__);
  static std::atomic<bool> told{false};
  if (!told.exchange(true))  // once per process (spdlog's headers do not build under nvcc)
    std::fprintf(stderr,
                 "leanback: int8 GEMM: cuBLAS declined %lldx%lldx%lld (trans_a %d, trans_b %d, lda %lld, ldb %lld): %s; "
                 "using the tiled kernel for such layouts\n",
                 static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(K), trans_a ? 1 : 0,
                 trans_b ? 1 : 0, static_cast<long long>(lda), static_cast<long long>(ldb), cuda::cublas().cublasGetStatusName(st));
  return false;
}

void gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const Tensor& A, int64_t a_offset,
              int64_t lda, const Tensor& B, int64_t b_offset, int64_t ldb, Tensor& out, int64_t ldo,
              const Tensor& row_scale, float alpha, bool accumulate) {
  LB_CHECK(M >= 0 && N >= 0 && K >= 0, "int8_gemm: negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return;
  const int device = out.device().index;
  const cudaStream_t s = cuda::stream(device);
  Tensor c = Tensor::empty({M, N}, DType::I32, out.device(), MemTag::Workspace);
  const int8_t* a = A.data<int8_t>() + a_offset;
  const int8_t* b = B.data<int8_t>() + b_offset;
  if (K == 0) {
    LB_CUDA_CHECK(cudaMemsetAsync(c.raw_data(), 0, c.nbytes(), s));
  } else if (!cublas_int8(device, trans_a, trans_b, M, N, K, a, lda, b, ldb, c.data<int32_t>())) {
    LB_CHECK(M <= int64_t{65535} * kTile, "int8_gemm: M = ", M, " exceeds the tiled kernel's grid");
    const dim3 grid(static_cast<unsigned>((N + kTile - 1) / kTile), static_cast<unsigned>((M + kTile - 1) / kTile));
    int8_gemm_tiled<<<grid, dim3(kTile, kTile), 0, s>>>(trans_a, trans_b, M, N, K, a, lda, b, ldb, c.data<int32_t>());
    LB_CUDA_CHECK_LAUNCH("int8_gemm_tiled");
  }
  dequantize_epilogue<<<cuda::blocks_for(M * N), cuda::kThreads, 0, s>>>(
      c.data<int32_t>(), M, N, out.data<float>(), ldo, data_or_null<float>(row_scale), alpha, accumulate);
  LB_CUDA_CHECK_LAUNCH("dequantize_epilogue");
}

const char* name() { return "cublas-int8 (CUBLAS_COMPUTE_32I)"; }

}  // namespace

const Int8GemmKernels kCudaInt8Gemm{gemm_f32, name};

}  // namespace lb::backend
