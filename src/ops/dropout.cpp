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

namespace lb {

Tensor dropout(const Tensor& x, double p, bool training, PhiloxStream& rng) {
  detail::check_defined(x, "dropout", "x");
  detail::check_floating(x, "dropout");
  LB_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  const Tensor xc = backend::contiguous(x);
  const int64_t n = x.numel();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty({(n + 7) / 8}, DType::U8, x.device());
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  backend::dropout_kernels(x.device())
      .forward(xc, y, mask, {rng.seed(), rng.subsequence(), rng.offset(), static_cast<float>(p)}, scale);
  PhiloxStream::State st = rng.state();  // skip the n draws used above
  st.offset += static_cast<uint64_t>(n);
  rng.set_state(st);
  if (autograd::should_record({x})) {
    autograd::record("dropout", y, {x}, {mask},
                     [scale](const Tensor& g, const std::vector<Tensor>& s,
                                const std::vector<bool>&) {
                       const Tensor gc = backend::contiguous(g);
                       Tensor dx = Tensor::empty(gc.shape(), gc.dtype(), gc.device());
                       backend::dropout_kernels(gc.device()).backward(gc, s[0], dx, scale);
                       return std::vector<Tensor>{dx};
                     });
    // Exact lean (kept_input.h): where x itself can be given back from what its producer
    // keeps (a LayerNorm's, a GELU's, attention's output), y can too, from those and the mask
    // (the backward kernel applied to x computes y's very products), so a consumer that keeps
    // y (a LoRA adapter's down-projection, a Linear after dropout) keeps nothing new.
    if (autograd::Node::OutputRecipe r = autograd::recipe_of(x); r.fn) {
      const size_t n_kept = r.kept.size();
      r.kept.push_back(mask);
      autograd::Node::Recompute x_again = std::move(r.fn);
      r.fn = [x_again = std::move(x_again), n_kept, scale](const std::vector<Tensor>& kept) {
        const Tensor xs = backend::contiguous(x_again(std::vector<Tensor>(kept.begin(), kept.begin() + n_kept)));
        Tensor out = Tensor::empty(xs.shape(), xs.dtype(), xs.device());
        backend::dropout_kernels(xs.device()).backward(xs, kept[n_kept], out, scale);
        return out;
      };
      y.grad_fn()->set_output_recipe(std::move(r));
    }
  }
  return y;
}

}  // namespace lb
