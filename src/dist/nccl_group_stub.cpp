// Builds without NCCL: the NCCL group is a named error (contract in lb/dist/nccl_group.h).
#if !LEANBACK_NCCL
#include "lb/core/error.h"
#include "lb/dist/nccl_group.h"

namespace lb::dist {

bool nccl_compiled() { return false; }

std::unique_ptr<ProcessGroup> make_nccl_group(int) {
  LB_FAIL("leanback was built without NCCL (configure with -DLEANBACK_CUDA=ON where CUDA and NCCL are "
          "installed, or point -DNCCL_ROOT at NCCL)");
}

int nccl_device_of_this_rank() { LB_FAIL("leanback was built without NCCL"); }

}  // namespace lb::dist
#endif
