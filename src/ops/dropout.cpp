// dropout (inverted): y = x * keep / (1 - p), keep ~ Bernoulli(1 - p), forward and backward.
// Randomness convention (the CUDA kernel must follow it to give the same mask): element i of
// x in row-major order takes draw number rng.offset() + i of the Philox stream and is kept
// iff philox_uniform(draw) > float(p); one call advances the stream by numel(x) draws.
// uniform is in (0, 1], so p = 0 keeps everything and p = 1 drops everything.
// Eval mode, and p = 0, return x itself and draw nothing, so toggling dropout off does not
// shift the random stream of later ops. p = 1 gives zeros (no 1/0 scale).
// The mask is saved bit-packed (1 bit per element, element i at bit i % 8 of byte i / 8): 32x
// smaller than a float mask, 8x smaller than PyTorch's bool mask.
#include <algorithm>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/nn.h"

namespace lb {

namespace {
using detail::contiguous_nograd;

// Elements per parallel chunk: a multiple of 8 so threads never share a mask byte.
constexpr int64_t kChunk = 1 << 13;

template <typename T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, float p, T scale,
                     uint64_t seed, uint64_t subsequence, uint64_t offset0) {
  const uint32_t key0 = static_cast<uint32_t>(seed), key1 = static_cast<uint32_t>(seed >> 32);
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, i1 = std::min(n, i0 + kChunk);
    uint64_t cached = ~0ull;
    uint32_t words[4] = {0, 0, 0, 0};
    uint8_t byte = 0;
    for (int64_t i = i0; i < i1; ++i) {
      const uint64_t off = offset0 + static_cast<uint64_t>(i);
      const uint64_t block = off >> 2;
      if (block != cached) {  // same counter layout as PhiloxStream::next_u32
        const uint32_t ctr[4] = {static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                                 static_cast<uint32_t>(subsequence),
                                 static_cast<uint32_t>(subsequence >> 32)};
        philox4x32_10(ctr, key0, key1, words);
        cached = block;
      }
      const bool keep = philox_uniform(words[off & 3]) > p;
      y[i] = keep ? x[i] * scale : T(0);
      byte |= static_cast<uint8_t>(keep) << (i & 7);
      if ((i & 7) == 7 || i + 1 == i1) {
        mask[i >> 3] = byte;
        byte = 0;
      }
    }
  }
}

template <typename T>
void dropout_backward(const T* g, const uint8_t* mask, T* dx, int64_t n, T scale) {
#pragma omp parallel for if (n > 4 * kChunk) schedule(static)
  for (int64_t i = 0; i < n; ++i) dx[i] = ((mask[i >> 3] >> (i & 7)) & 1) ? g[i] * scale : T(0);
}
}  // namespace

Tensor dropout(const Tensor& x, double p, bool training, PhiloxStream& rng) {
  detail::check_defined(x, "dropout", "x");
  detail::check_cpu(x, "dropout");
  detail::check_floating(x, "dropout");
  LB_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  const Tensor xc = contiguous_nograd(x);
  const int64_t n = x.numel();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mask = Tensor::empty({(n + 7) / 8}, DType::U8, x.device());
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  detail::dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_forward<T>(xc.data<T>(), y.data<T>(), mask.data<uint8_t>(), n,
                       static_cast<float>(p), static_cast<T>(scale), rng.seed(),
                       rng.subsequence(), rng.offset());
  });
  PhiloxStream::State st = rng.state();  // skip the n draws used above
  st.offset += static_cast<uint64_t>(n);
  rng.set_state(st);
  if (autograd::should_record({x})) {
    autograd::record("dropout", y, {x}, {mask},
                     [n, scale](const Tensor& g, const std::vector<Tensor>& s,
                                const std::vector<bool>&) {
                       const Tensor gc = contiguous_nograd(g);
                       Tensor dx = Tensor::empty(gc.shape(), gc.dtype(), gc.device());
                       detail::dispatch_float(gc.dtype(), "dropout backward", [&](auto tag) {
                         using T = decltype(tag);
                         dropout_backward<T>(gc.data<T>(), s[0].data<uint8_t>(), dx.data<T>(),
                                             n, static_cast<T>(scale));
                       });
                       return std::vector<Tensor>{dx};
                     });
  }
  return y;
}

}  // namespace lb
