// CPU dropout kernels (src/backend/dropout.h): Philox blocks kPhiloxLanes at a time
// (philox_lanes.h), chunks of elements a multiple of 8 apart so threads never share a mask
// byte.
#include "src/backend/dropout.h"

#include <algorithm>

#include "lb/core/dispatch.h"
#include "src/cpu/philox_lanes.h"

namespace lb::backend {
namespace {

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

void forward(const Tensor& x, Tensor& y, Tensor& mask, const DropoutDraws& d, double scale) {
  detail::dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    dropout_forward<T>(x.data<T>(), y.data<T>(), mask.data<uint8_t>(), x.numel(), d.p, static_cast<T>(scale), d.seed,
                       d.subsequence, d.offset);
  });
}

void backward(const Tensor& g, const Tensor& mask, Tensor& dx, double scale) {
  detail::dispatch_float(g.dtype(), "dropout backward", [&](auto tag) {
    using T = decltype(tag);
    dropout_backward<T>(g.data<T>(), mask.data<uint8_t>(), dx.data<T>(), g.numel(), static_cast<T>(scale));
  });
}

}  // namespace

const DropoutKernels kCpuDropout{forward, backward};

}  // namespace lb::backend
