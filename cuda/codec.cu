// CUDA kernels of the kept-tensor codecs, the twins of src/cpu/codec.cpp (formulas and layout:
// src/backend/codec.h): one block per group for the scales, one thread per payload byte for
// the codes, each element drawing its own Philox number (philox_draw), so the bytes equal the
// CPU's. Products and sums use the _rn intrinsics: nvcc would otherwise fuse them into FMAs,
// which the CPU build (-ffp-contract=off) does not.
#include <cstdint>

#include "cuda/block_reduce.cuh"
#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "lb/core/dispatch.h"
#include "lb/core/philox.h"
#include "src/backend/codec.h"

namespace lb::backend {
namespace {

template <typename T>
__global__ void group_params_kernel(const T* x, CodecLayout l, float* scale, float* zero) {
  __shared__ float shared[cuda::kWarps];
  const int levels = codec_levels(l.kind);
  const bool affine = codec_affine(l.kind);
  for (int64_t g = blockIdx.x; g < l.groups; g += gridDim.x) {
    const int64_t i0 = g * l.group, i1 = i0 + l.group < l.n ? i0 + l.group : l.n;
    float lo = static_cast<float>(x[i0]), hi = lo;
    for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
      const float v = static_cast<float>(x[i]);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    hi = cuda::block_reduce<float, true>(hi, shared);
    lo = -cuda::block_reduce<float, true>(-lo, shared);
    if (threadIdx.x == 0) {
      if (affine) {
        scale[g] = codec_scale(__fsub_rn(hi, lo), levels);
        zero[g] = lo;
      } else {
        scale[g] = codec_scale(fmaxf(fabsf(lo), fabsf(hi)), levels);
      }
    }
  }
}

template <typename T>
__device__ int element_code(const T* x, int64_t i, const CodecLayout& l, const float* scale, const float* zero,
                            const CodecDraws& d) {
  const int levels = codec_levels(l.kind);
  const bool affine = codec_affine(l.kind);
  const int64_t g = i / l.group;
  const float inv = codec_inverse(scale[g]);
  const float z = affine ? zero[g] : 0.f;
  float u = 0.5f;
  if (d.stochastic)
    u = codec_uniform(philox_draw(d.offset + static_cast<uint64_t>(i / 2), d.subsequence,
                                  static_cast<uint32_t>(d.seed), static_cast<uint32_t>(d.seed >> 32)),
                      static_cast<int>(i & 1));
  return codec_code(__fmul_rn(__fsub_rn(static_cast<float>(x[i]), z), inv), u, affine ? 0 : -levels, levels);
}

template <typename T>
__global__ void encode_kernel(const T* x, CodecLayout l, const float* scale, const float* zero, CodecDraws d,
                              uint8_t* payload) {
  const int bits = codec_bits(l.kind), per_byte = 8 / bits;
  LB_CUDA_FOR_EACH(byte, l.payload) {
    uint32_t b = 0;
    for (int k = 0; k < per_byte; ++k) {
      const int64_t i = byte * per_byte + k;
      if (i >= l.n) break;
      const int c = element_code(x, i, l, scale, zero, d);
      b |= (static_cast<uint32_t>(c) & ((1u << bits) - 1u)) << (bits * k);
    }
    payload[byte] = static_cast<uint8_t>(b);
  }
}

template <typename T>
__global__ void decode_kernel(const uint8_t* payload, CodecLayout l, const float* scale, const float* zero, T* y) {
  const int bits = codec_bits(l.kind), per_byte = 8 / bits;
  const bool affine = codec_affine(l.kind);
  LB_CUDA_FOR_EACH(i, l.n) {
    const int64_t g = i / l.group;
    float v;
    if (l.kind == CodecKind::Int8) {
      v = __fmul_rn(static_cast<float>(reinterpret_cast<const int8_t*>(payload)[i]), scale[g]);
    } else {
      const uint32_t c = (payload[i / per_byte] >> (bits * static_cast<int>(i % per_byte))) & ((1u << bits) - 1u);
      v = __fmul_rn(static_cast<float>(c), scale[g]);
      if (affine) v = __fadd_rn(zero[g], v);
    }
    y[i] = static_cast<T>(v);
  }
}

template <typename T>
__global__ void bf16_encode_kernel(const T* x, int64_t n, uint16_t* y) {
  LB_CUDA_FOR_EACH(i, n) y[i] = f32_to_bf16(static_cast<float>(x[i]));
}

template <typename T>
__global__ void bf16_decode_kernel(const uint16_t* x, int64_t n, T* y) {
  LB_CUDA_FOR_EACH(i, n) y[i] = static_cast<T>(bf16_to_f32(x[i]));
}

void pack(const Tensor& x, Tensor& packed, const CodecLayout& l, const CodecDraws& d) {
  if (l.n == 0) return;
  const auto stream = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "codec pack", [&](auto tag) {
    using T = decltype(tag);
    uint8_t* out = packed.data<uint8_t>();
    if (l.kind == CodecKind::BF16) {
      bf16_encode_kernel<T><<<cuda::blocks_for(l.n), cuda::kThreads, 0, stream>>>(x.data<T>(), l.n,
                                                                                reinterpret_cast<uint16_t*>(out));
      return;
    }
    float* scale = reinterpret_cast<float*>(out);
    float* zero = codec_affine(l.kind) ? scale + l.groups : nullptr;
    group_params_kernel<T><<<cuda::row_blocks(l.groups), cuda::kThreads, 0, stream>>>(x.data<T>(), l, scale, zero);
    encode_kernel<T><<<cuda::blocks_for(l.payload), cuda::kThreads, 0, stream>>>(x.data<T>(), l, scale, zero, d,
                                                                                 out + 4 * l.floats);
  });
  LB_CUDA_CHECK_LAUNCH("codec pack");
}

void unpack(const Tensor& packed, Tensor& x, const CodecLayout& l) {
  if (l.n == 0) return;
  const auto stream = cuda::stream(x.device().index);
  detail::dispatch_float(x.dtype(), "codec unpack", [&](auto tag) {
    using T = decltype(tag);
    const uint8_t* in = packed.data<uint8_t>();
    if (l.kind == CodecKind::BF16) {
      bf16_decode_kernel<T><<<cuda::blocks_for(l.n), cuda::kThreads, 0, stream>>>(
          reinterpret_cast<const uint16_t*>(in), l.n, x.data<T>());
      return;
    }
    const float* scale = reinterpret_cast<const float*>(in);
    const float* zero = codec_affine(l.kind) ? scale + l.groups : nullptr;
    decode_kernel<T><<<cuda::blocks_for(l.n), cuda::kThreads, 0, stream>>>(in + 4 * l.floats, l, scale, zero,
                                                                           x.data<T>());
  });
  LB_CUDA_CHECK_LAUNCH("codec unpack");
}

}  // namespace

const CodecKernels kCudaCodec{pack, unpack};

}  // namespace lb::backend
