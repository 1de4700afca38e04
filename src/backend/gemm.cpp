// Operand layout analysis shared by the CPU and CUDA GEMMs (src/backend/gemm.h).
#include "src/backend/gemm.h"

#include <algorithm>
#include <limits>

#include "lb/core/checks.h"

namespace lb::backend {

namespace {

// Leading dims of `t` broadcast against `batch` (right-aligned), as strides.
Shape batch_strides_of(const Tensor& t, const Shape& batch) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t tb = t.dim() - 2;
  Shape st(nb, 0);
  for (int64_t i = 0; i < tb; ++i) {
    const int64_t j = nb - tb + i;
    if (t.shape()[i] != 1) st[j] = t.strides()[i];
  }
  return st;
}

// Describes `x` (…, R, C) used as op(x) with op = transpose when `want_trans`.
MatDesc describe(const Tensor& x, bool want_trans, const Shape& batch) {
  MatDesc d;
  d.t = x;
  const int64_t nd = x.dim();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int64_t R = d.t.shape()[nd - 2], C = d.t.shape()[nd - 1];
    const int64_t sR = d.t.strides()[nd - 2], sC = d.t.strides()[nd - 1];
    // Row-major: unit column stride and rows at least a row apart (an empty matrix is
    // never read, any layout will do).
    if (d.t.numel() == 0 ||
        ((C <= 1 || sC == 1) && (R <= 1 || sR >= std::max<int64_t>(1, C)))) {
      d.rows = R;
      d.cols = C;
      d.ld = (R <= 1 || d.t.numel() == 0) ? std::max<int64_t>(1, C) : sR;
      d.trans = want_trans;
      break;
    }
    // Column-major: it is the row-major transpose, so flip the flag instead of copying.
    if ((R <= 1 || sR == 1) && (C <= 1 || sC >= std::max<int64_t>(1, R))) {
      d.rows = C;
      d.cols = R;
      d.ld = C <= 1 ? std::max<int64_t>(1, R) : sC;
      d.trans = !want_trans;
      break;
    }
    // Anything else (e.g. a strided slice of the last axis): one contiguous copy.
    LB_CHECK(attempt == 0, "internal: gemm operand layout");
    Tensor copy = Tensor::empty(x.shape(), x.dtype(), x.device(), MemTag::Workspace);
    copy.copy_(x);
    d.t = copy;
  }
  d.batch_strides = batch_strides_of(d.t, batch);
  return d;
}

}  // namespace

bool chains(const Shape& strides, const Shape& batch, int64_t inner) {
  int64_t expect = inner;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    if (batch[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= batch[d];
  }
  return true;
}

bool all_broadcast(const Shape& strides, const Shape& batch) {
  for (size_t d = 0; d < batch.size(); ++d)
    if (batch[d] != 1 && strides[d] != 0) return false;
  return true;
}

GemmProblem describe_gemm(const Tensor& c, const Tensor& a, bool trans_a, const Tensor& b,
                          bool trans_b, const Shape& batch) {
  GemmProblem p;
  p.A = describe(a, trans_a, batch);
  p.B = describe(b, trans_b, batch);
  const MatDesc& A = p.A;
  const MatDesc& B = p.B;
  p.M = A.trans ? A.cols : A.rows;
  p.K = A.trans ? A.rows : A.cols;
  p.N = B.trans ? B.rows : B.cols;
  const int64_t cd = c.dim(), M = p.M, N = p.N, K = p.K;
  LB_CHECK((B.trans ? B.cols : B.rows) == K && c.shape()[cd - 2] == M && c.shape()[cd - 1] == N,
           "internal: gemm_into shapes a ", shape_str(a.shape()), " b ", shape_str(b.shape()),
           " c ", shape_str(c.shape()));
  LB_CHECK(c.strides()[cd - 1] == 1 || N <= 1, "internal: gemm_into needs row-major c");
  p.ldc = M <= 1 ? std::max<int64_t>(1, N) : c.strides()[cd - 2];
  LB_CHECK(p.ldc >= std::max<int64_t>(1, N), "internal: gemm_into c rows overlap");
  p.c_strides = batch_strides_of(c, batch);
  for (int64_t s : batch) p.nbatch *= s;
  if (M == 0 || N == 0) return p;
  // BLAS takes 32-bit sizes; a larger single matrix needs a 64-bit-index BLAS.
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  LB_CHECK(M <= kMaxInt && N <= kMaxInt && K <= kMaxInt && A.ld <= kMaxInt && B.ld <= kMaxInt &&
               p.ldc <= kMaxInt,
           "matmul: a matrix dimension exceeds 2^31 - 1 (a ", shape_str(a.shape()), ", b ",
           shape_str(b.shape()), "); the BLAS libraries here take 32-bit sizes");
  return p;
}

}  // namespace lb::backend
