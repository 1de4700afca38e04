// fwht: fast Walsh–Hadamard transform along one axis in independent blocks of B = 2^k
// (include/lb/ops/hadamard.h). Unnormalised, Sylvester (natural) order:
//   H_1 = [1],  H_2n = [[H_n, H_n], [H_n, -H_n]],
// which is what the in-place butterfly produces when the stride h doubles from 1 (the
// kernels: src/backend/fwht.h). The axis (length L) is zero-padded to Lp = ceil(L / B) * B.
// y = H P x with P the zero padding, so dx = P^T H^T dy = (H dy)[:L] (H is symmetric):
// backward is the same transform on the gradient, truncated; nothing is saved.
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/hadamard.h"
#include "src/backend/copy.h"
#include "src/backend/fwht.h"

namespace lb {

Tensor fwht(const Tensor& x, int64_t dim, int64_t block_log2) {
  detail::check_defined(x, "fwht", "x");
  detail::check_floating(x, "fwht");
  LB_CHECK(x.dim() > 0, "fwht: needs at least one dimension, got a 0-d tensor");
  LB_CHECK(block_log2 >= 0 && block_log2 <= 30, "fwht: block_log2 must be in [0, 30], got ",
           block_log2);
  dim = normalize_dim(dim, x.dim());
  const int64_t B = int64_t{1} << block_log2;
  const int64_t L = x.shape()[dim];
  const int64_t Lp = (L + B - 1) / B * B;
  Shape out_shape = x.shape();
  out_shape[dim] = Lp;
  Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out_shape[d];
  for (int64_t d = dim + 1; d < x.dim(); ++d) inner *= out_shape[d];
  if (out.numel() > 0)
    backend::fwht_kernels(x.device()).forward(backend::contiguous(x), out, outer, L, Lp, inner, block_log2);
  if (autograd::should_record({x})) {
    autograd::record("fwht", out, {x}, {},
                     [dim, block_log2, L](const Tensor& g, const std::vector<Tensor>&,
                                          const std::vector<bool>&) {
                       Tensor gx = fwht(g, dim, block_log2);  // length Lp: no padding added
                       if (gx.shape()[dim] != L) gx = gx.slice(dim, 0, L);
                       return std::vector<Tensor>{gx};
                     });
  }
  return out;
}

}  // namespace lb
