// Strided batched GEMM on the CPU through OpenBLAS (see gemm.h for the contract).
// OpenBLAS 0.3.21 has no cblas_?gemm_batch, so batches are a loop of GEMMs unless the layout
// lets them collapse into one (the common Linear-style cases do).
// Threads: OpenBLAS is single-threaded (blas_config.h); a loop of independent GEMMs is split
// over OpenMP threads by batch element, and one large GEMM by blocks of its output.
#include "src/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/core/precision.h"
#include "src/backend/gemm.h"
#include "src/cpu/blas_config.h"
#include "src/cpu/gemm_serial.h"
#include "src/cpu/sgemm_bf16.h"

namespace lb::cpu {

namespace {

using backend::all_broadcast;
using backend::chains;
using backend::MatDesc;

template <typename T>
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                      int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  gemm_serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
// An operand of bf16 values (uint16_t) with an f32 result: the bf16 kernel reads it as it is
// (only reached when gemm_reads_bf16()).
template <typename TA, typename TB>
  requires(std::is_same_v<TA, uint16_t> || std::is_same_v<TB, uint16_t>)
inline void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const TA* a,
                      int64_t lda, const TB* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  sgemm_bf16(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Below this many multiply-adds (about 0.1 ms of one core) one thread does the product: a
// fork/join costs little on an idle machine, but under oversubscription every parallel
// region risks waiting for a preempted thread.
constexpr double kParallelMacs = 1 << 23;
constexpr int64_t kBlocksPerThread = 3;

int gemm_threads(double macs) {
  if (omp_in_parallel() || macs < kParallelMacs) return 1;
  return omp_get_max_threads();
}

// One GEMM over `nt` threads. Normally split into blocks of C: row blocks when M >= N (each
// reads its rows of op(A) and all of op(B)), else column blocks; block edges are multiples of
// 16 (the kernels' unroll) so no block gets a ragged kernel tail in the middle of C. When the
// inner dimension dominates (a weight gradient g_yᵀ x: K = batch·tokens, C small), blocks of
// C would each pack the whole of the other, large operand; then K is split instead, each
// thread packs only its slice of both, and the partial products are summed.
template <typename TA, typename TB, typename T>
void split_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const TA* a,
                int64_t lda, const TB* b, int64_t ldb, T beta, T* c, int64_t ldc, int nt) {
  if (nt > 1 && k >= 4 * std::max(m, n) && k >= 64 * nt) {
    const int64_t want = std::max<int64_t>(nt, std::min<int64_t>(kBlocksPerThread * nt, k / 256));
    const int64_t step = (k / want + 15) / 16 * 16;
    const int parts = static_cast<int>((k + step - 1) / step);
    // Partials of parts 1.. (part 0 goes straight into C with beta).
    Tensor partial_t = Tensor::empty({(parts - 1) * m * n}, DTypeOf<T>::value, Device::cpu(),
                                     MemTag::Workspace);
    T* partial = partial_t.data<T>();
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
    for (int i = 0; i < parts; ++i) {
      const int64_t lo = i * step, cnt = std::min(k, lo + step) - lo;
      const TA* ai = ta ? a + lo * lda : a + lo;  // columns lo.. of op(A)
      const TB* bi = tb ? b + lo : b + lo * ldb;  // rows lo.. of op(B)
      if (i == 0)
        blas_gemm(ta, tb, m, n, cnt, alpha, ai, lda, bi, ldb, beta, c, ldc);
      else
        blas_gemm(ta, tb, m, n, cnt, alpha, ai, lda, bi, ldb, T(0),
                  partial + static_cast<size_t>(i - 1) * m * n, n);
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < m; ++r)
      for (int i = 1; i < parts; ++i) {
        const T* src = partial + static_cast<size_t>(i - 1) * m * n + r * n;
        T* dst = c + r * ldc;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
      }
    return;
  }
  const bool by_rows = m >= n;
  const int64_t len = by_rows ? m : n;
  // kBlocksPerThread blocks per thread, handed out dynamically: on a shared machine a thread
  // may be preempted, and the others then take its remaining blocks instead of waiting.
  // Each block packs the shared operand again, which costs little next to its product.
  const int64_t per = len >= kBlocksPerThread * nt * 64 ? kBlocksPerThread * nt : nt;
  const int64_t step = (len / per + 15) / 16 * 16;
  if (nt <= 1 || step == 0 || step >= len) {
    blas_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int blocks = static_cast<int>((len + step - 1) / step);
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
  for (int i = 0; i < blocks; ++i) {
    const int64_t lo = i * step, cnt = std::min(len, lo + step) - lo;
    if (by_rows)  // rows lo.. of op(A) and of C
      blas_gemm(ta, tb, cnt, n, k, alpha, ta ? a + lo : a + lo * lda, lda, b, ldb, beta,
                c + lo * ldc, ldc);
    else  // columns lo.. of op(B) and of C
      blas_gemm(ta, tb, m, cnt, k, alpha, a, lda, tb ? b + lo * ldb : b + lo, ldb, beta, c + lo,
                ldc);
  }
}

// cpu::gemm for any operand types: split over the threads when large enough.
template <typename TA, typename TB, typename T>
void threaded_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const TA* a,
                   int64_t lda, const TB* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  configure_blas();
  split_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
             gemm_threads(static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k)));
}

// gemm_into's products once the operands are described: TA, TB are the operands' element
// types (float, double, or uint16_t for bf16 values), T the result's.
template <typename TA, typename TB, typename T>
void gemm_described(Tensor& c, const MatDesc& A, const MatDesc& B, const Shape& batch,
                    const Shape& c_strides, int64_t M, int64_t N, int64_t K, int64_t ldc,
                    int64_t nbatch, bool accumulate) {
  const TA* pa = static_cast<const TA*>(A.t.raw_data());
  const TB* pb = static_cast<const TB*>(B.t.raw_data());
  T* pc = static_cast<T*>(c.raw_data());
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  // Fold the batch into M: a's rows (…, M) form one strided axis, b is shared and c is a
  // full contiguous stack. One (M·batch) x N GEMM.
  if (nbatch > 1 && M * nbatch <= kMaxInt && !A.trans && all_broadcast(B.batch_strides, batch) &&
      chains(A.batch_strides, batch, M * A.ld) && chains(c_strides, batch, M * ldc)) {
    threaded_gemm(false, B.trans, M * nbatch, N, K, T(1), pa, A.ld, pb, B.ld,
                  accumulate ? T(1) : T(0), pc, ldc);
    return;
  }
  // Fold the batch into K: c is shared by all batch elements (a reduced gradient) and a, b
  // both stack along the inner dim. One M x N GEMM with K·batch.
  if (nbatch > 1 && K * nbatch <= kMaxInt && all_broadcast(c_strides, batch) && A.trans &&
      !B.trans && chains(A.batch_strides, batch, K * A.ld) &&
      chains(B.batch_strides, batch, K * B.ld)) {
    threaded_gemm(true, false, M, N, K * nbatch, T(1), pa, A.ld, pb, B.ld,
                  accumulate ? T(1) : T(0), pc, ldc);
    return;
  }
  // General: one GEMM per batch element. c elements shared across broadcast dims are
  // overwritten on their first visit (all broadcast indices 0) and accumulated after.
  const int64_t nb = static_cast<int64_t>(batch.size());
  auto offsets = [&](int64_t i, int64_t& oa, int64_t& ob, int64_t& oc, bool& first) {
    oa = ob = oc = 0;
    first = true;
    for (int64_t d = nb - 1; d >= 0; --d) {
      const int64_t id = i % batch[d];
      i /= batch[d];
      oa += id * A.batch_strides[d];
      ob += id * B.batch_strides[d];
      oc += id * c_strides[d];
      if (c_strides[d] == 0 && id != 0) first = false;
    }
  };
  bool c_distinct = true;  // every batch element writes its own c (no reduction)
  for (int64_t d = 0; d < nb; ++d) c_distinct = c_distinct && (batch[d] == 1 || c_strides[d] != 0);
  const double macs = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const int nt = gemm_threads(macs * static_cast<double>(nbatch));
  if (c_distinct && nt > 1 && nbatch >= nt) {
    // Independent products (per-head GEMMs): one single-threaded GEMM each, handed out
    // dynamically (robust to a preempted thread).
#pragma omp parallel for num_threads(nt) schedule(dynamic)
    for (int64_t i = 0; i < nbatch; ++i) {
      int64_t oa, ob, oc;
      bool first;
      offsets(i, oa, ob, oc, first);
      blas_gemm(A.trans, B.trans, M, N, K, T(1), pa + oa, A.ld, pb + ob, B.ld,
                accumulate ? T(1) : T(0), pc + oc, ldc);
    }
    return;
  }
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t oa, ob, oc;
    bool first;
    offsets(i, oa, ob, oc, first);
    const T beta = (accumulate || !first) ? T(1) : T(0);
    threaded_gemm(A.trans, B.trans, M, N, K, T(1), pa + oa, A.ld, pb + ob, B.ld, beta, pc + oc, ldc);
  }
}

// x as f32 (a bf16 operand the bf16 kernel will not read: its values widened, exactly).
Tensor as_f32(const Tensor& x) {
  if (x.dtype() != DType::BF16) return x;
  Tensor f = Tensor::empty(x.shape(), DType::F32, x.device(), MemTag::Workspace);
  f.copy_(x);
  return f;
}

}  // namespace

bool gemm_reads_bf16() {
  return matmul_precision() == MatmulPrecision::BF16 && sgemm_bf16_preferred();
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  threaded_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  threaded_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  threaded_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  threaded_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
          int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  threaded_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void gemm_into(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
               const Shape& batch, bool accumulate) {
  const bool a_bf16 = a.dtype() == DType::BF16, b_bf16 = b.dtype() == DType::BF16;
  if ((a_bf16 || b_bf16) && (c.dtype() != DType::F32 || !gemm_reads_bf16())) {
    LB_CHECK(c.dtype() == DType::F32, "internal: gemm_into with bf16 operands needs an f32 result");
    gemm_into(c, as_f32(a), trans_a, as_f32(b), trans_b, batch, accumulate);
    return;
  }
  const backend::GemmProblem p = backend::describe_gemm(c, a, trans_a, b, trans_b, batch);
  if (p.M == 0 || p.N == 0) return;
  if (p.K == 0 || p.nbatch == 0) {
    if (!accumulate) c.zero_();
    return;
  }
  auto run = [&](auto ta_tag, auto tb_tag, auto t_tag) {
    using TA = decltype(ta_tag);
    using TB = decltype(tb_tag);
    using T = decltype(t_tag);
    gemm_described<TA, TB, T>(c, p.A, p.B, batch, p.c_strides, p.M, p.N, p.K, p.ldc, p.nbatch, accumulate);
  };
  if (a_bf16 && b_bf16) {
    run(uint16_t{}, uint16_t{}, float{});
  } else if (a_bf16) {
    run(uint16_t{}, float{}, float{});
  } else if (b_bf16) {
    run(float{}, uint16_t{}, float{});
  } else {
    LB_CHECK(a.dtype() == c.dtype() && b.dtype() == c.dtype(), "internal: gemm_into dtypes a ",
             dtype_name(a.dtype()), " b ", dtype_name(b.dtype()), " c ", dtype_name(c.dtype()));
    detail::dispatch_float(c.dtype(), "matmul", [&](auto tag_) { run(tag_, tag_, tag_); });
  }
}

}  // namespace lb::cpu

namespace lb::backend {

const GemmKernels kCpuGemm{cpu::gemm_into, cpu::gemm_reads_bf16};

}  // namespace lb::backend
