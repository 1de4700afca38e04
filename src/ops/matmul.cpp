// matmul: batched, broadcasting matrix product with transpose flags, forward and backward.
//   C = op(A) op(B),  op(A) (…, M, K), op(B) (…, K, N), C (…, M, N)
// Backward (G = dC): dop(A) = G op(B)ᵀ, dop(B) = op(A)ᵀ G. Each gradient is written in the
// operand's stored orientation with transpose flags (no transposed copies), and summed over
// the batch dims the operand was broadcast along inside the GEMM loop (no temporary).
#include <algorithm>
#include <string>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/ops/linalg.h"
#include "src/backend/gemm.h"

namespace lb {

namespace {

std::string operand_str(const Tensor& t, bool trans) {
  return shape_str(t.shape()) + (trans ? " (transposed)" : "");
}

// Broadcast of the batch dims (all but the last two) of a and b; the error names both shapes.
Shape matmul_batch(const Tensor& a, bool ta, const Tensor& b, bool tb) {
  const int64_t na = a.dim() - 2, nb = b.dim() - 2;
  const int64_t n = std::max(na, nb);
  Shape out(n);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t da = i < n - na ? 1 : a.shape()[i - (n - na)];
    const int64_t db = i < n - nb ? 1 : b.shape()[i - (n - nb)];
    LB_CHECK(da == db || da == 1 || db == 1, "matmul: batch dims of a ", operand_str(a, ta),
             " and b ", operand_str(b, tb), " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// A gradient of shape `shape` (contiguous) as the product op(x) op(y), summed over the batch
// dims that `shape` lacks or has as 1.
Tensor grad_product(const Shape& shape, const Tensor& x, bool tx, const Tensor& y, bool ty,
                    const Shape& batch) {
  // One of x, y is the incoming gradient; the other may be a bf16 operand kept for backward.
  const DType dt = x.dtype() == DType::BF16 ? y.dtype() : x.dtype();
  Tensor g = Tensor::empty(shape, dt, x.device());
  backend::gemm_kernels(x.device()).gemm_into(g, x, tx, y, ty, batch, /*accumulate=*/false);
  return g;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  detail::check_defined(a, "matmul", "a");
  detail::check_defined(b, "matmul", "b");
  detail::check_same_device(a, b, "matmul");
  detail::check_same_dtype(a, b, "matmul");
  detail::check_floating(a, "matmul");
  LB_CHECK(a.dim() >= 2 && b.dim() >= 2, "matmul: operands need at least 2 dims, got a ",
           shape_str(a.shape()), " and b ", shape_str(b.shape()),
           ". HINT: unsqueeze a vector to (1, n) or (n, 1)");
  const int64_t M = a.size(trans_a ? -1 : -2), Ka = a.size(trans_a ? -2 : -1);
  const int64_t Kb = b.size(trans_b ? -1 : -2), N = b.size(trans_b ? -2 : -1);
  LB_CHECK(Ka == Kb, "matmul: inner dimensions differ: a ", operand_str(a, trans_a), " gives K=",
           Ka, " but b ", operand_str(b, trans_b), " gives K=", Kb);
  const Shape batch = matmul_batch(a, trans_a, b, trans_b);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  backend::gemm_kernels(a.device()).gemm_into(out, a, trans_a, b, trans_b, batch, /*accumulate=*/false);

  if (autograd::should_record({a, b})) {
    // dA needs B and dB needs A: save each only when the other side wants a gradient.
    // (as bf16 under bf16 products: backward uses them only as product operands)
    const Tensor save_a = b.requires_grad() ? autograd::keep_product_operand(a) : Tensor();
    const Tensor save_b = a.requires_grad() ? autograd::keep_product_operand(b) : Tensor();
    autograd::record(
        "matmul", out, {a, b}, {save_a, save_b},
        [trans_a, trans_b, batch, a_shape = a.shape(), b_shape = b.shape()](
            const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          const Tensor& sa = s[0];  // may be bf16: gemm_into reads or widens it
          const Tensor& sb = s[1];
          Tensor ga, gb;
          if (need[0]) {
            ga = trans_a ? grad_product(a_shape, sb, trans_b, g, true, batch)     // op(B) Gᵀ
                         : grad_product(a_shape, g, false, sb, !trans_b, batch);  // G op(B)ᵀ
          }
          if (need[1]) {
            gb = trans_b ? grad_product(b_shape, g, true, sa, trans_a, batch)     // Gᵀ op(A)
                         : grad_product(b_shape, sa, !trans_a, g, false, batch);  // op(A)ᵀ G
          }
          return std::vector<Tensor>{ga, gb};
        });
  }
  return out;
}

}  // namespace lb
