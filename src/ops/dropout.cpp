// dropout (inverted): y = x * keep / (1 - p), keep ~ Bernoulli(1 - p), forward and backward.
// Randomness convention (the CUDA kernel must follow it to give the same mask): element i of
// x in row-major order takes draw number rng.offset() + i of the Philox stream and is kept
// iff philox_uniform(draw) > float(p); one call advances the stream by numel(x) draws.
// uniform is in (0, 1], so p = 0 keeps everything and p = 1 drops everything.
// Eval mode, and p = 0, return x itself and draw nothing, so toggling dropout off does not
// shift the random stream of later ops. p = 1 gives zeros (no 1/0 scale).
// The mask is saved bit-packed (1 bit per element, element i at bit i % 8 of byte i / 8): 32x
// smaller than a float mask, 8x smaller than PyTorch's bool mask. Kernels: src/backend/dropout.h
// (src/cpu/dropout.cpp, cuda/dropout.cu). Where x has an output recipe (kept_input.h) so has y.
#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/ops/nn.h"
#include "src/backend/copy.h"
#include "src/backend/dropout.h"
#include "src/ops/dropout_draw.h"

namespace lb {

namespace ops_internal {

DropoutDraw draw_dropout(const Tensor& x, double p, PhiloxStream& rng) {
  const Tensor xc = backend::contiguous(x);
  const int64_t n = x.numel();
  DropoutDraw d;
  d.y = Tensor::empty(x.shape(), x.dtype(), x.device());
  d.mask = Tensor::empty({(n + 7) / 8}, DType::U8, x.device());
  d.scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  backend::dropout_kernels(x.device())
      .forward(xc, d.y, d.mask, {rng.seed(), rng.subsequence(), rng.offset(), static_cast<float>(p)}, d.scale);
  PhiloxStream::State st = rng.state();  // skip the n draws used above
  st.offset += static_cast<uint64_t>(n);
  rng.set_state(st);
  return d;
}

Tensor apply_dropout_mask(const Tensor& x, const Tensor& mask, double scale) {
  const Tensor xc = backend::contiguous(x);
  Tensor out = Tensor::empty(xc.shape(), xc.dtype(), xc.device());
  backend::dropout_kernels(xc.device()).backward(xc, mask, out, scale);
  return out;
}

}  // namespace ops_internal

Tensor dropout(const Tensor& x, double p, bool training, PhiloxStream& rng) {
  detail::check_defined(x, "dropout", "x");
  detail::check_floating(x, "dropout");
  LB_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  ops_internal::DropoutDraw d = ops_internal::draw_dropout(x, p, rng);
  Tensor y = d.y;
  if (autograd::should_record({x})) {
    const double scale = d.scale;
    autograd::record("dropout", y, {x}, {d.mask},
                     [scale](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
                       return std::vector<Tensor>{ops_internal::apply_dropout_mask(g, s[0], scale)};
                     });
    // Exact lean (kept_input.h): where x itself can be given back from what its producer
    // keeps (a LayerNorm's, a GELU's, attention's output), y can too, from those and the mask,
    // so a consumer that keeps y (a Linear after dropout) keeps nothing new.
    if (autograd::Node::OutputRecipe r = autograd::recipe_of(x); r.fn) {
      const size_t n_kept = r.kept.size();
      r.kept.push_back(d.mask);
      autograd::Node::Recompute x_again = std::move(r.fn);
      r.fn = [x_again = std::move(x_again), n_kept, scale](const std::vector<Tensor>& kept) {
        return ops_internal::apply_dropout_mask(
            x_again(std::vector<Tensor>(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(n_kept))),
            kept[n_kept], scale);
      };
      y.grad_fn()->set_output_recipe(std::move(r));
    }
  }
  return y;
}

}  // namespace lb
