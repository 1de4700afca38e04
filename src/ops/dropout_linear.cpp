// dropout_linear: y = dropout(x) wᵀ in one op, keeping x once. LoRA's down-projection
// (lora_A on dropout(x), lb/nn/lora.h) as two ops keeps the dropped-out copy of x for g_w —
// one activation-sized tensor per adapter, although x is the base layer's input and often
// kept already. Here the node keeps x itself (or, exact lean, what x's producer keeps to give
// it back: kept_input.h) and the 1-bit mask, and backward recomputes the dropped-out x:
//   g_w = g_yᵀ (x ⊙ keep / (1 - p))       (M, O)ᵀ(M, I)
//   g_x = (g_y w) ⊙ keep / (1 - p)
// Adapters on one input (query, key, value) keep that input once. The mask is drawn as
// dropout() draws it (ops_internal::draw_dropout) and the recomputed copy is the draw's very
// products, so every number equals dropout then linear, bit for bit.
#include "lb/autograd/grad_mode.h"
#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/linalg.h"
#include "lb/ops/nn.h"
#include "src/ops/dropout_draw.h"

namespace lb {

Tensor dropout_linear(const Tensor& x, const Tensor& w, double p, bool training, PhiloxStream& rng) {
  detail::check_defined(x, "dropout_linear", "x");
  detail::check_floating(x, "dropout_linear");
  LB_CHECK(p >= 0.0 && p <= 1.0, "dropout_linear: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return linear(x, w);
  ops_internal::DropoutDraw d;
  Tensor y;
  {
    NoGradGuard no_grad;
    d = ops_internal::draw_dropout(x, p, rng);
    y = linear(d.y, w);  // checks the shapes
  }
  d.y = Tensor();  // the dropped-out copy lives for the product only
  if (!autograd::should_record({x, w})) return y;
  // x for g_w: itself, or what its producer keeps to give it back.
  autograd::KeptInput kept_x = w.requires_grad() ? autograd::keep_input(x, x) : autograd::KeptInput{};
  std::vector<Tensor> saved = kept_x.tensors;
  const size_t n_x = kept_x.tensors.size();
  kept_x.tensors.clear();
  saved.push_back(d.mask);
  saved.push_back(x.requires_grad() ? w : Tensor());  // w for g_x (a parameter: not counted)
  const int64_t I = w.size(1), O = w.size(0), M = x.numel() / I;
  autograd::record(
      "dropout_linear", y, {x, w}, saved,
      [x_shape = x.shape(), I, O, M, kept_x, n_x, scale = d.scale](
          const Tensor& g, std::vector<Tensor>& s, const std::vector<bool>& need) {
        const Tensor g2 = g.contiguous().view({M, O});
        const Tensor& mask = s[n_x];
        Tensor gx, gw;
        if (need[1]) {  // g_w = g_yᵀ dropout(x): x made again, then dropped before g_x
          const Tensor in = ops_internal::apply_dropout_mask(
              kept_x.get({s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n_x)}), mask, scale);
          for (size_t i = 0; i < n_x; ++i) s[i] = Tensor();
          gw = matmul(g2, in.view({M, I}), true, false);
        }
        if (need[0]) gx = ops_internal::apply_dropout_mask(matmul(g2, s.back()), mask, scale).view(x_shape);
        return std::vector<Tensor>{gx, gw};
      });
  return y;
}

}  // namespace lb
