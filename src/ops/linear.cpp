// linear: y = x wᵀ + b with the vanilla exact backward, as in torch.nn.functional.linear.
//   x (…, I), w (O, I), b (O) -> y (…, O);   x's leading dims are the rows M.
// Backward from the forward line:
//   g_x = g_y w          (M, O)(O, I)
//   g_w = g_yᵀ x         (O, M)(M, I)   — the batch folds into the GEMM's inner dim
//   g_b = Σ_rows g_y
// Only what `needs` asks for is computed; the node saves only x (for g_w) and w (for g_x).
// No copies of x: its leading dims fold into the GEMM rows when they are contiguous, and
// otherwise the GEMM loops over them. The bias is written into y first and the GEMM adds to
// it (beta = 1), which costs nothing over the zero fill a beta = 0 GEMM does.
#include <algorithm>

#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/autograd/recompute.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/linalg.h"
#include "src/backend/bias.h"
#include "src/backend/copy.h"
#include "src/backend/gemm.h"

namespace lb {

namespace {

// A (…, n) tensor as a stack of matrices: itself when it has ≥ 2 dims, else one row (1, n).
Tensor as_matrices(const Tensor& t) {
  if (t.dim() >= 2) return t;
  const int64_t s = t.strides()[0];
  return make_view(t, {1, t.shape()[0]}, {s * std::max<int64_t>(1, t.shape()[0]), s}, t.offset());
}

Shape batch_of(const Tensor& m) { return Shape(m.shape().begin(), m.shape().end() - 2); }

// y rows := b (the GEMM then accumulates x wᵀ on top).
void fill_rows(Tensor& y, const Tensor& b) {
  backend::bias_kernels(y.device()).fill_rows(y, backend::contiguous(b));
}

// Σ over rows of g (…, cols) -> (cols).
Tensor column_sums(const Tensor& g, int64_t cols) {
  Tensor out = Tensor::empty({cols}, g.dtype(), g.device());
  backend::bias_kernels(g.device()).column_sums(backend::contiguous(g), out);
  return out;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  detail::check_defined(x, "linear", "x");
  detail::check_defined(w, "linear", "w");
  detail::check_same_device(x, w, "linear");
  detail::check_same_dtype(x, w, "linear");
  detail::check_floating(x, "linear");
  LB_CHECK(w.dim() == 2, "linear: w must be (out_features, in_features), got w ",
           shape_str(w.shape()), " for x ", shape_str(x.shape()));
  LB_CHECK(x.dim() >= 1, "linear: x must have at least 1 dim (…, in_features), got x ",
           shape_str(x.shape()));
  const int64_t O = w.shape()[0], I = w.shape()[1];
  LB_CHECK(x.shape().back() == I, "linear: x ", shape_str(x.shape()), " has ", x.shape().back(),
           " input features but w ", shape_str(w.shape()), " expects ", I);
  if (b.defined()) {
    detail::check_same_device(x, b, "linear");
    detail::check_same_dtype(x, b, "linear");
    LB_CHECK(b.dim() == 1 && b.shape()[0] == O, "linear: bias b ", shape_str(b.shape()),
             " does not match w ", shape_str(w.shape()), "; expected ", shape_str({O}));
  }

  Shape y_shape = x.shape();
  y_shape.back() = O;
  Tensor y = Tensor::empty(y_shape, x.dtype(), x.device());
  const Tensor xm = as_matrices(x);
  Tensor ym = as_matrices(y);
  const Shape batch = batch_of(xm);
  const bool record = autograd::should_record({x, w, b});
  // x as bf16 under bf16 products (g_w's product rounds it anyway); w is resident anyway.
  const Tensor save_x = record && w.requires_grad() ? autograd::keep_product_operand(x) : Tensor();
  if (autograd::values_unread()) {
    // A recomputation that reads none of y's values (recompute.h): the graph without the product.
    y.zero_();
  } else {
    if (b.defined()) fill_rows(y, b);
    // The bf16 copy is the operand the product would round x to: where the bf16 kernel reads
    // bf16 values, it reads half the bytes and skips the rounding.
    const backend::GemmKernels& gemm = backend::gemm_kernels(x.device());
    const bool read_copy = save_x.defined() && save_x.dtype() == DType::BF16 && gemm.reads_bf16();
    gemm.gemm_into(ym, read_copy ? as_matrices(save_x) : xm, false, w, true, batch, /*accumulate=*/b.defined());
  }

  if (record) {
    // x itself, or (exact lean) what its producer keeps to give it back (kept_input.h).
    autograd::KeptInput kept_x = autograd::keep_input(x, save_x);
    std::vector<Tensor> saved = kept_x.tensors;
    saved.push_back(x.requires_grad() ? w : Tensor());
    const size_t n_x = kept_x.tensors.size();
    kept_x.tensors.clear();
    autograd::record(
        "linear", y, {x, w, b}, saved,
        [x_shape = x.shape(), O, I, batch, kept_x, n_x](const Tensor& g, std::vector<Tensor>& s,
                                                         const std::vector<bool>& need) {
          const Tensor gm = as_matrices(g);
          Tensor gx, gw, gb;
          // g_w first: x (made again where exact lean keeps its producer's tensors) and the
          // decoded copies it came from are dropped before g_x is allocated.
          if (need[1]) {  // g_w = g_yᵀ x, summed over every row of the batch
            gw = Tensor::empty({O, I}, g.dtype(), g.device());
            // x may be bf16
            const Tensor xs = kept_x.get({s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_x)});
            for (size_t i = 0; i < n_x; ++i) s[i] = Tensor();
            backend::gemm_kernels(g.device()).gemm_into(gw, gm, true, as_matrices(xs), false, batch, false);
          }
          if (need[0]) {  // g_x = g_y w
            gx = Tensor::empty(x_shape, g.dtype(), g.device());
            Tensor gxm = as_matrices(gx);
            backend::gemm_kernels(g.device()).gemm_into(gxm, gm, false, s.back(), false, batch, false);
          }
          if (need[2]) gb = column_sums(g, O);  // g_b = Σ_rows g_y
          return std::vector<Tensor>{gx, gw, gb};
        });
  }
  return y;
}

}  // namespace lb
