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
#include "src/ops/philox_lanes.h"

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
    const uint64_t o0 = offset0 + static_cast<uint64_t>(i0);  // this chunk's draws: [o0, o1)
    const uint64_t o1 = offset0 + static_cast<uint64_t>(i1);
    uint8_t keep[kChunk];
    for (uint64_t b = o0 >> 2; 4 * b < o1; b += detail::kPhiloxLanes) {
      uint32_t words[4 * detail::kPhiloxLanes];
      detail::philox_blocks(b, subsequence, key0, key1, words);
      const uint64_t lo = std::max(o0, 4 * b), hi = std::min(o1, 4 * b + 4 * detail::kPhiloxLanes);
      const uint32_t* w = words + (lo - 4 * b);
      const int64_t k0 = static_cast<int64_t>(lo - offset0), len = static_cast<int64_t>(hi - lo);
#pragma omp simd
      for (int64_t k = 0; k < len; ++k) {
        const bool kept = philox_uniform(w[k]) > p;
        keep[k0 + k - i0] = kept;
        y[k0 + k] = kept ? x[k0 + k] * scale : T(0);
      }
    }
    // Pack 8 elements per byte (i0 is a multiple of 8).
    for (int64_t i = i0; i < i1; i += 8) {
      uint8_t byte = 0;
      for (int64_t k = 0; k < 8 && i + k < i1; ++k) byte |= static_cast<uint8_t>(keep[i + k - i0] << k);
      mask[i >> 3] = byte;
    }
  }
}

template <typename T>
void dropout_backward(const T* g, const uint8_t* mask, T* dx, int64_t n, T scale) {
  const int64_t bytes = (n + 7) / 8;
#pragma omp parallel for if (n > 4 * kChunk) schedule(static)
  for (int64_t b = 0; b < bytes; ++b) {
    const unsigned m = mask[b];
    const int64_t i = 8 * b;
    if (i + 8 <= n) {
      for (int k = 0; k < 8; ++k) dx[i + k] = ((m >> k) & 1u) ? g[i + k] * scale : T(0);
    } else {
      for (int64_t k = 0; i + k < n; ++k) dx[i + k] = ((m >> k) & 1u) ? g[i + k] * scale : T(0);
    }
  }
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
