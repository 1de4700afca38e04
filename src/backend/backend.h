// Internal: how an op reaches the kernels of its tensors' device. Each op family declares a
// table of kernel entry points (e.g. src/backend/elementwise.h); src/cpu/ defines the CPU
// table and cuda/ the CUDA one, in files of the same basename. The ops keep their checks and
// autograd wiring in one device-agnostic place and call kernels_for(device, ...): one
// dispatch mechanism, no device branches inside the ops or the strategies.
#pragma once
#include "lb/core/device.h"
#include "lb/core/error.h"
#include "lb/core/tensor.h"

namespace lb::backend {

// The table for device d: cpu, or cuda (null in a build without CUDA).
template <typename Table>
const Table& kernels_for(Device d, const Table& cpu, const Table* cuda, const char* family) {
  if (d.is_cpu()) return cpu;
  LB_CHECK(cuda != nullptr, family, " on ", d.str(), ": this build has no CUDA backend (LEANBACK_CUDA=OFF)");
  return *cuda;
}

// A kernel argument that may be absent (an optional weight, an unwanted gradient).
template <typename T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Declares the CPU table `cpu_table` (defined in src/cpu/) and, in a CUDA build, the CUDA
// one `cuda_table` (defined in cuda/), and `accessor(Device)` choosing between them.
#if defined(LEANBACK_WITH_CUDA)
#define LB_KERNEL_TABLES(Table, accessor, cpu_table, cuda_table, family) \
  extern const Table cpu_table;                                          \
  extern const Table cuda_table;                                         \
  inline const Table& accessor(Device d) { return kernels_for(d, cpu_table, &cuda_table, family); }
#else
#define LB_KERNEL_TABLES(Table, accessor, cpu_table, cuda_table, family) \
  extern const Table cpu_table;                                          \
  inline const Table& accessor(Device d) { return kernels_for<Table>(d, cpu_table, nullptr, family); }
#endif

}  // namespace lb::backend
