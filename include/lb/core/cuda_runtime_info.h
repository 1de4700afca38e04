// Whether CUDA is compiled in and how many devices the runtime sees. Without a driver the
// runtime returns an error rather than 0 devices; any error counts as "no device".
#pragma once
#include <string>
#include <vector>

namespace lb {

bool cuda_compiled();
int cuda_device_count();
std::vector<std::string> cuda_device_names();
// Waits for the work queued on `device`'s stream (timing; a no-op without CUDA).
void cuda_synchronize(int device = 0);

}  // namespace lb
