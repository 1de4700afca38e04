// CPU-only build: no CUDA devices.
#ifndef LEANBACK_WITH_CUDA
#include "lb/core/cuda_runtime_info.h"

namespace lb {
bool cuda_compiled() { return false; }
int cuda_device_count() { return 0; }
std::vector<std::string> cuda_device_names() { return {}; }
void cuda_synchronize(int) {}
}  // namespace lb
#endif
