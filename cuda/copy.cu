// CUDA copy and fill kernels, the twins of src/cpu/copy.cpp (src/backend/copy.h): one
// element per thread of a grid-stride loop, any strides, any pair of dtypes (converted
// through double by the functions the CPU uses, src/core/element_convert.h); a dense
// same-dtype copy is one cudaMemcpyAsync.
#include <cstdint>

#include "cuda/runtime.h"
#include "cuda/strided.cuh"
#include "src/backend/copy.h"
#include "src/core/element_convert.h"

namespace lb::backend {
namespace {

using cuda::offset_of;
using cuda::Strides;
using cuda::strides_of;
using detail::load_as_double;
using detail::store_from_double;

// Same dtype: move the element's bytes (Word: its size).
template <typename Word>
__global__ void copy_same_kernel(Word* dst, Strides sd, const Word* src, Strides ss, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) dst[offset_of(i, sd)] = src[offset_of(i, ss)];
}

__global__ void copy_convert_kernel(void* dst, Strides sd, DType dt, const void* src, Strides ss, DType st,
                                    int64_t n) {
  LB_CUDA_FOR_EACH(i, n) store_from_double(dst, offset_of(i, sd), dt, load_as_double(src, offset_of(i, ss), st));
}

__global__ void fill_kernel(void* dst, Strides sd, DType dt, double value, int64_t n) {
  LB_CUDA_FOR_EACH(i, n) store_from_double(dst, offset_of(i, sd), dt, value);
}

void copy(Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const cudaStream_t st = cuda::stream(dst.device().index);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    LB_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, st));
    return;
  }
  const Strides sd = strides_of(dst, dst.shape()), ss = strides_of(src, dst.shape());
  const unsigned blocks = cuda::blocks_for(n);
  if (dst.dtype() == src.dtype()) {
    switch (dtype_size(dst.dtype())) {
      case 1: copy_same_kernel<uint8_t><<<blocks, cuda::kThreads, 0, st>>>(
          static_cast<uint8_t*>(dst.raw_data()), sd, static_cast<const uint8_t*>(src.raw_data()), ss, n); break;
      case 2: copy_same_kernel<uint16_t><<<blocks, cuda::kThreads, 0, st>>>(
          static_cast<uint16_t*>(dst.raw_data()), sd, static_cast<const uint16_t*>(src.raw_data()), ss, n); break;
      case 4: copy_same_kernel<uint32_t><<<blocks, cuda::kThreads, 0, st>>>(
          static_cast<uint32_t*>(dst.raw_data()), sd, static_cast<const uint32_t*>(src.raw_data()), ss, n); break;
      default: copy_same_kernel<uint64_t><<<blocks, cuda::kThreads, 0, st>>>(
          static_cast<uint64_t*>(dst.raw_data()), sd, static_cast<const uint64_t*>(src.raw_data()), ss, n); break;
    }
    LB_CUDA_CHECK_LAUNCH("copy_same_kernel");
    return;
  }
  copy_convert_kernel<<<blocks, cuda::kThreads, 0, st>>>(dst.raw_data(), sd, dst.dtype(), src.raw_data(), ss,
                                                          src.dtype(), n);
  LB_CUDA_CHECK_LAUNCH("copy_convert_kernel");
}

void fill(Tensor& dst, double value) {
  const int64_t n = dst.numel();
  const cudaStream_t st = cuda::stream(dst.device().index);
  fill_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(dst.raw_data(), strides_of(dst, dst.shape()),
                                                               dst.dtype(), value, n);
  LB_CUDA_CHECK_LAUNCH("fill_kernel");
}

}  // namespace

const CopyKernels kCudaCopy{copy, fill};

}  // namespace lb::backend
