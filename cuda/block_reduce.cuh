// Internal to the CUDA kernels: the max or sum of one value per thread over a block of
// cuda::kThreads threads (warp shuffles, then the warps' partials through shared memory);
// every thread gets the result. Kernels that reduce rows run one block per row with it.
#pragma once
#include "cuda/runtime.h"

namespace lb::cuda {

constexpr int kWarps = kThreads / 32;

// `shared` holds kWarps values and may be reused by the next call.
template <typename T, bool kMax>
__device__ T block_reduce(T v, T* shared) {
  for (int o = 16; o > 0; o >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? (other > v ? other : v) : v + other;
  }
  __syncthreads();  // the previous reduction's readers are done with `shared`
  if ((threadIdx.x & 31) == 0) shared[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = shared[0];
  for (int w = 1; w < kWarps; ++w) r = kMax ? (shared[w] > r ? shared[w] : r) : r + shared[w];
  return r;
}

// Blocks for `rows` rows handled one block each (grid-stride over the rest).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(rows < 1 ? 1 : (rows < 65535 * 16 ? rows : 65535 * 16));
}

}  // namespace lb::cuda
