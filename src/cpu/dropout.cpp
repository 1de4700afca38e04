// CPU dropout kernels (src/backend/dropout.h): the keep decisions and their bit packing are
// philox_lanes.h's, shared with the fused attention's dropout; chunks of elements a multiple
// of 8 apart so threads never share a mask byte.
#include "src/backend/dropout.h"

#include <algorithm>
#include <cstring>

#include "lb/core/dispatch.h"
#include "src/cpu/philox_lanes.h"

namespace lb::backend {
namespace {

// Elements per parallel chunk: a multiple of 8 so threads never share a mask byte.
constexpr int64_t kChunk = 1 << 13;

template <typename T>
void dropout_forward(const T* x, T* y, uint8_t* mask, int64_t n, float p, T scale,
                     uint64_t seed, uint64_t subsequence, uint64_t offset0) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 1) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, len = std::min(n, i0 + kChunk) - i0;
    uint8_t keep[kChunk];  // element i0 + k is draw offset0 + i0 + k of the stream
    detail::dropout_keep_bytes(seed, subsequence, offset0 + static_cast<uint64_t>(i0), len, p, keep);
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) y[i0 + k] = keep[k] ? x[i0 + k] * scale : T(0);
    std::memset(mask + (i0 >> 3), 0, static_cast<size_t>((len + 7) / 8));
    detail::or_keep_bits(mask, i0, keep, len);
  }
}

template <typename T>
void dropout_backward(const T* g, const uint8_t* mask, T* dx, int64_t n, T scale) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 4) schedule(static)
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t i0 = ch * kChunk, len = std::min(n, i0 + kChunk) - i0;
    uint8_t keep[kChunk];
    detail::unpack_keep_bits(mask, i0, len, keep);
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) dx[i0 + k] = keep[k] ? g[i0 + k] * scale : T(0);
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
