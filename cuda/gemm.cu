// CUDA GEMM through cuBLAS, the twin of src/cpu/gemm.cpp (src/backend/gemm.h): the same
// operand description (stored orientation, leading dimension, batch strides; transposed
// views never copied), then one cublasGemmEx where the batch folds into M or K as on the CPU,
// one strided-batched call where every operand's batch is a single stride (0 = shared), and a
// loop otherwise (a c summed over broadcast dims: first visit overwrites, later ones add).
//
// Row-major to cuBLAS's column-major: a row-major (r x c, ld) matrix is the column-major
// (c x r, ld) transpose, so C = op(A) op(B) is issued as Cᵀ = op(B)ᵀ op(A)ᵀ: operands swapped,
// each keeping its own transpose flag, sizes (N, M, K).
//
// Types: f64 in f64; f32 in f32 (CUBLAS_COMPUTE_32F: no TF32 unless asked for, precision
// tf32; under precision bf16, CUBLAS_COMPUTE_32F_FAST_16BF); bf16 operands with an f32 result in bf16 x
// bf16 -> f32 (a single bf16 operand is widened to f32 first, exactly, since cuBLAS takes one
// input type).
#include <cublas_v2.h>

#include <limits>

#include "cuda/cublas.h"
#include "cuda/runtime.h"
#include "lb/core/checks.h"
#include "lb/core/precision.h"
#include "src/backend/gemm.h"

namespace lb::backend {
namespace {

cudaDataType_t cuda_type(DType dt) {
  switch (dt) {
    case DType::F32: return CUDA_R_32F;
    case DType::F64: return CUDA_R_64F;
    case DType::BF16: return CUDA_R_16BF;
    default: LB_FAIL("matmul on CUDA: unsupported dtype ", dtype_name(dt));
  }
}

// The batch as one stride of `s` elements per step (true), when the non-1 dims chain
// row-major from the innermost (a shared operand: s = 0 on every dim).
bool single_stride(const Shape& strides, const Shape& batch, int64_t& s) {
  s = 0;
  bool first = true;
  int64_t expect = 0;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (first) {
      s = strides[d];
      expect = s * batch[d];
      first = false;
    } else {
      if (strides[d] != expect) return false;
      expect *= batch[d];
    }
  }
  return true;
}

Tensor widened(const Tensor& x) {
  Tensor f = Tensor::empty(x.shape(), DType::F32, x.device(), MemTag::Workspace);
  f.copy_(x);
  return f;
}

struct Call {
  cublasHandle_t h;
  cudaDataType_t ta, tb, tc;
  cublasComputeType_t compute;
  bool f64;
  size_t esize_a, esize_b, esize_c;
  const char* pa;
  const char* pb;
  char* pc;
  const GemmProblem* p;

  // C (+ offsets in elements) = op(A) op(B) with sizes (m, n, k) as cuBLAS column-major
  // (n, m, k) on swapped operands; beta 0 or 1.
  void gemm(int64_t oa, int64_t ob, int64_t oc, int64_t m, int64_t n, int64_t k, bool add) const {
    const double one = 1.0, zero = 0.0;
    const float onef = 1.f, zerof = 0.f;
    const void* alpha = f64 ? static_cast<const void*>(&one) : static_cast<const void*>(&onef);
    const void* beta = add ? alpha : (f64 ? static_cast<const void*>(&zero) : static_cast<const void*>(&zerof));
    LB_CUBLAS_CHECK(cuda::cublas().cublasGemmEx(h, p->B.trans ? CUBLAS_OP_T : CUBLAS_OP_N, p->A.trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha,
                                 pb + ob * static_cast<int64_t>(esize_b), tb, static_cast<int>(p->B.ld),
                                 pa + oa * static_cast<int64_t>(esize_a), ta, static_cast<int>(p->A.ld), beta,
                                 pc + oc * static_cast<int64_t>(esize_c), tc, static_cast<int>(p->ldc), compute,
                                 CUBLAS_GEMM_DEFAULT));
  }
  void strided(int64_t sa, int64_t sb, int64_t sc, int64_t count, bool add) const {
    const double one = 1.0, zero = 0.0;
    const float onef = 1.f, zerof = 0.f;
    const void* alpha = f64 ? static_cast<const void*>(&one) : static_cast<const void*>(&onef);
    const void* beta = add ? alpha : (f64 ? static_cast<const void*>(&zero) : static_cast<const void*>(&zerof));
    LB_CUBLAS_CHECK(cuda::cublas().cublasGemmStridedBatchedEx(
        h, p->B.trans ? CUBLAS_OP_T : CUBLAS_OP_N, p->A.trans ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(p->N),
        static_cast<int>(p->M), static_cast<int>(p->K), alpha, pb, tb, static_cast<int>(p->B.ld), sb, pa, ta,
        static_cast<int>(p->A.ld), sa, beta, pc, tc, static_cast<int>(p->ldc), sc, static_cast<int>(count), compute,
        CUBLAS_GEMM_DEFAULT));
  }
};

void gemm_into(Tensor& c, const Tensor& a_in, bool trans_a, const Tensor& b_in, bool trans_b, const Shape& batch,
               bool accumulate) {
  const bool a_bf16 = a_in.dtype() == DType::BF16, b_bf16 = b_in.dtype() == DType::BF16;
  LB_CHECK(!(a_bf16 || b_bf16) || c.dtype() == DType::F32, "internal: gemm_into with bf16 operands needs an f32 result");
  // cuBLAS takes one input type: a single bf16 operand is widened (exactly).
  const Tensor a = a_bf16 && !b_bf16 ? widened(a_in) : a_in;
  const Tensor b = b_bf16 && !a_bf16 ? widened(b_in) : b_in;
  LB_CHECK(a.dtype() == b.dtype() && (a.dtype() == c.dtype() || a.dtype() == DType::BF16),
           "internal: gemm_into dtypes a ", dtype_name(a.dtype()), " b ", dtype_name(b.dtype()), " c ",
           dtype_name(c.dtype()));
  const GemmProblem p = describe_gemm(c, a, trans_a, b, trans_b, batch);
  if (p.M == 0 || p.N == 0) return;
  if (p.K == 0 || p.nbatch == 0) {
    if (!accumulate) c.zero_();
    return;
  }
  Call call;
  call.h = cuda::cublas_handle(c.device().index);
  call.ta = cuda_type(p.A.t.dtype());
  call.tb = cuda_type(p.B.t.dtype());
  call.tc = cuda_type(c.dtype());
  call.f64 = c.dtype() == DType::F64;
  // precision bf16 (lb/core/precision.h) on f32 operands: cuBLAS rounds them to bf16 and
  // accumulates in f32 on the tensor cores, as the CPU's bf16 kernel does.
  // precision tf32 (opt-in): the TF32 tensor-core path.
  const bool f32_in = p.A.t.dtype() == DType::F32;
  const MatmulPrecision mp = matmul_precision();
  call.compute = call.f64                                   ? CUBLAS_COMPUTE_64F
                 : f32_in && mp == MatmulPrecision::BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                 : f32_in && mp == MatmulPrecision::TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                          : CUBLAS_COMPUTE_32F;
  call.esize_a = dtype_size(p.A.t.dtype());
  call.esize_b = dtype_size(p.B.t.dtype());
  call.esize_c = dtype_size(c.dtype());
  call.pa = static_cast<const char*>(p.A.t.raw_data());
  call.pb = static_cast<const char*>(p.B.t.raw_data());
  call.pc = static_cast<char*>(c.raw_data());
  call.p = &p;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  const int64_t M = p.M, N = p.N, K = p.K, nbatch = p.nbatch;
  // Fold the batch into M: a's rows form one strided axis, b is shared, c one stack.
  if (nbatch > 1 && M * nbatch <= kMaxInt && !p.A.trans && all_broadcast(p.B.batch_strides, batch) &&
      chains(p.A.batch_strides, batch, M * p.A.ld) && chains(p.c_strides, batch, M * p.ldc)) {
    call.gemm(0, 0, 0, M * nbatch, N, K, accumulate);
    return;
  }
  // Fold the batch into K: c shared by all batch elements (a reduced gradient), a and b
  // stacked along the inner dim.
  if (nbatch > 1 && K * nbatch <= kMaxInt && all_broadcast(p.c_strides, batch) && p.A.trans && !p.B.trans &&
      chains(p.A.batch_strides, batch, K * p.A.ld) && chains(p.B.batch_strides, batch, K * p.B.ld)) {
    call.gemm(0, 0, 0, M, N, K * nbatch, accumulate);
    return;
  }
  const int64_t nb = static_cast<int64_t>(batch.size());
  bool c_distinct = true;  // every batch element writes its own c (no reduction)
  for (int64_t d = 0; d < nb; ++d) c_distinct = c_distinct && (batch[d] == 1 || p.c_strides[d] != 0);
  int64_t sa = 0, sb = 0, sc = 0;
  if (nbatch == 1) {
    call.gemm(0, 0, 0, M, N, K, accumulate);
    return;
  }
  if (c_distinct && nbatch <= kMaxInt && single_stride(p.A.batch_strides, batch, sa) &&
      single_stride(p.B.batch_strides, batch, sb) && single_stride(p.c_strides, batch, sc)) {
    call.strided(sa, sb, sc, nbatch, accumulate);
    return;
  }
  // General: one GEMM per batch element, in order on the stream (so the adds into a shared
  // c follow its first write).
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t oa = 0, ob = 0, oc = 0, rest = i;
    bool first = true;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t id = rest % batch[d];
      rest /= batch[d];
      oa += id * p.A.batch_strides[d];
      ob += id * p.B.batch_strides[d];
      oc += id * p.c_strides[d];
      if (p.c_strides[d] == 0 && id != 0) first = false;
    }
    call.gemm(oa, ob, oc, M, N, K, accumulate || !first);
  }
}

// cuBLAS takes one input type: a single bf16 operand is widened, so an f32 input is cheaper.
bool reads_bf16() { return false; }

}  // namespace

const GemmKernels kCudaGemm{gemm_into, reads_bf16};

}  // namespace lb::backend
