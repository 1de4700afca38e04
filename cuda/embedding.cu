// CUDA embedding kernels, the twins of src/cpu/embedding.cpp (src/backend/embedding.h): the
// index check as a device reduction (the smallest bad position, then one 16-byte read back),
// a grid-stride row gather, and the backward as atomic adds (the CPU sums in index order;
// here the order of adds into one row varies, within the parity tolerances).
#include <cstdint>

#include "cuda/runtime.h"
#include "lb/core/dispatch.h"
#include "lb/core/views.h"
#include "src/backend/copy.h"
#include "src/backend/embedding.h"

namespace lb::backend {
namespace {

template <typename Ix>
__global__ void first_bad_kernel(const Ix* ix, int64_t n, int64_t V, unsigned long long* first) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = static_cast<int64_t>(ix[k]);
    if (v < 0 || v >= V) atomicMin(first, static_cast<unsigned long long>(k));
  }
}

template <typename T, typename Ix>
__global__ void gather_kernel(const Ix* ix, const T* w, T* out, int64_t n, int64_t D) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * D;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / D, j = i % D;
    out[i] = w[static_cast<int64_t>(ix[k]) * D + j];
  }
}

template <typename T, typename Ix>
__global__ void scatter_add_kernel(const T* dout, const Ix* ix, int64_t n, int64_t D, int64_t padding_idx,
                                   T* dweight) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n * D;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t k = i / D, j = i % D;
    const int64_t v = static_cast<int64_t>(ix[k]);
    if (v != padding_idx) atomicAdd(dweight + v * D + j, dout[i]);
  }
}

template <typename F>
void for_index_type(const Tensor& idx, F&& fn) {
  if (idx.dtype() == DType::I64) fn(idx.data<int64_t>());
  else fn(idx.data<int32_t>());
}

int64_t first_bad_index(const Tensor& indices, int64_t V, int64_t* value) {
  const int64_t n = indices.numel();
  if (n == 0) return -1;
  const int dev = indices.device().index;
  const cudaStream_t s = cuda::stream(dev);
  // One device word for the position (all ones = none), read back with the index it names.
  Tensor first = Tensor::empty({1}, DType::I64, indices.device(), MemTag::Workspace);
  LB_CUDA_CHECK(cudaMemsetAsync(first.raw_data(), 0xff, sizeof(unsigned long long), s));
  for_index_type(indices, [&](const auto* ix) {
    first_bad_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(
        ix, n, V, static_cast<unsigned long long*>(first.raw_data()));
  });
  LB_CUDA_CHECK_LAUNCH("first_bad_kernel");
  unsigned long long pos = 0;
  LB_CUDA_CHECK(cudaMemcpyAsync(&pos, first.raw_data(), sizeof(pos), cudaMemcpyDeviceToHost, s));
  LB_CUDA_CHECK(cudaStreamSynchronize(s));
  if (pos == ~0ull) return -1;
  const int64_t k = static_cast<int64_t>(pos);
  *value = backend::to_dtype(views::slice(backend::reshape(indices, {n}), 0, k, k + 1).to(Device::cpu()), DType::I64)
               .data<int64_t>()[0];
  return k;
}

void gather(const Tensor& indices, const Tensor& weight, Tensor& out) {
  const int64_t n = indices.numel(), D = weight.size(1);
  if (n * D == 0) return;
  const cudaStream_t s = cuda::stream(weight.device().index);
  detail::dispatch_float(weight.dtype(), "embedding on CUDA", [&](auto tag) {
    using T = decltype(tag);
    for_index_type(indices, [&](const auto* ix) {
      gather_kernel<T><<<cuda::blocks_for(n * D), cuda::kThreads, 0, s>>>(ix, weight.data<T>(), out.data<T>(), n, D);
    });
  });
  LB_CUDA_CHECK_LAUNCH("gather_kernel");
}

void scatter_add(const Tensor& dout, const Tensor& indices, int64_t padding_idx, Tensor& dweight) {
  const int64_t n = indices.numel(), D = dweight.size(1);
  if (n * D == 0) return;
  const cudaStream_t s = cuda::stream(dout.device().index);
  detail::dispatch_float(dout.dtype(), "embedding backward on CUDA", [&](auto tag) {
    using T = decltype(tag);
    for_index_type(indices, [&](const auto* ix) {
      scatter_add_kernel<T><<<cuda::blocks_for(n * D), cuda::kThreads, 0, s>>>(dout.data<T>(), ix, n, D, padding_idx,
                                                                               dweight.data<T>());
    });
  });
  LB_CUDA_CHECK_LAUNCH("scatter_add_kernel");
}

}  // namespace

// No row-sparse form yet: a CUDA embedding builds the dense gradient.
const EmbeddingKernels kCudaEmbedding{first_bad_index, gather, scatter_add, nullptr, nullptr};

}  // namespace lb::backend
