// CPU ReLU kernels (src/backend/relu.h): chunks of 16k elements over the threads (a multiple
// of 16, so threads never share mask bytes), AVX-512 for f32 where the CPU has it.
#include <algorithm>
#include <type_traits>
#if defined(__x86_64__)
#include <immintrin.h>
#define LB_RELU_AVX512 1
#endif

#include "lb/core/dispatch.h"
#include "src/backend/relu.h"
#include "src/cpu/cpu_features.h"
#include "src/cpu/isa_target.h"

namespace lb::backend {
namespace {

// Elements per parallel chunk: a multiple of 16 so threads never share mask bytes.
constexpr int64_t kChunk = 1 << 14;

#if LB_RELU_AVX512
LB_ISA_BEGIN_AVX512
// Float elements [i, i + 16k): returns where the vector loop stopped.
int64_t relu_forward_avx512(const float* x, float* y, uint8_t* mask, int64_t i, int64_t i1) {
  const __m512 zero = _mm512_setzero_ps();
  for (; i + 16 <= i1; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __mmask16 m = _mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ);
    _mm512_storeu_ps(y + i, _mm512_maskz_mov_ps(m, v));
    mask[i >> 3] = static_cast<uint8_t>(m);
    mask[(i >> 3) + 1] = static_cast<uint8_t>(m >> 8);
  }
  return i;
}

int64_t relu_backward_avx512(const float* g, const uint8_t* mask, float* dx, int64_t i, int64_t i1) {
  for (; i + 16 <= i1; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(mask[i >> 3] | (mask[(i >> 3) + 1] << 8));
    _mm512_storeu_ps(dx + i, _mm512_maskz_loadu_ps(m, g + i));
  }
  return i;
}
LB_ISA_END
#endif

// Elements [i0, i1) (i0 a multiple of 8): y and the mask bits.
template <typename T>
void relu_forward_range(const T* x, T* y, uint8_t* mask, int64_t i0, int64_t i1) {
  int64_t i = i0;
#if LB_RELU_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (cpu::isa_enabled(cpu::Isa::Avx512)) i = relu_forward_avx512(x, y, mask, i, i1);
#endif
  for (; i < i1; i += 8) {
    uint8_t byte = 0;
    for (int64_t k = 0; k < 8 && i + k < i1; ++k) {
      const bool pos = x[i + k] > T(0);
      y[i + k] = pos ? x[i + k] : T(0);
      byte |= static_cast<uint8_t>(pos << k);
    }
    mask[i >> 3] = byte;
  }
}

template <typename T>
void relu_backward_range(const T* g, const uint8_t* mask, T* dx, int64_t i0, int64_t i1) {
  int64_t i = i0;
#if LB_RELU_AVX512
  if constexpr (std::is_same_v<T, float>)
    if (cpu::isa_enabled(cpu::Isa::Avx512)) i = relu_backward_avx512(g, mask, dx, i, i1);
#endif
  for (; i < i1; i += 8) {
    const unsigned m = mask[i >> 3];
    for (int64_t k = 0; k < 8 && i + k < i1; ++k) dx[i + k] = ((m >> k) & 1u) ? g[i + k] : T(0);
  }
}

template <typename F>
void for_chunks(int64_t n, F f) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for if (chunks > 2) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) f(c * kChunk, std::min(n, (c + 1) * kChunk));
}
void forward(const Tensor& x, Tensor& y, Tensor& mask) {
  const int64_t n = x.numel();
  detail::dispatch_float(x.dtype(), "relu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    uint8_t* pm = mask.data<uint8_t>();
    for_chunks(n, [&](int64_t i0, int64_t i1) { relu_forward_range(px, py, pm, i0, i1); });
  });
}

void backward(const Tensor& g, const Tensor& mask, Tensor& dx) {
  const int64_t n = g.numel();
  detail::dispatch_float(g.dtype(), "relu backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pg = g.data<T>();
    const uint8_t* pm = mask.data<uint8_t>();
    T* pd = dx.data<T>();
    for_chunks(n, [&](int64_t i0, int64_t i1) { relu_backward_range(pg, pm, pd, i0, i1); });
  });
}

}  // namespace

const ReluKernels kCpuRelu{forward, backward};

}  // namespace lb::backend
