// INSTANT's low-rank kernels on CUDA (src/backend/lowrank.h): the generic versions, whose
// products are batched cuBLAS GEMMs through the device's GEMM table and whose sums are the
// reduction kernels. (The CPU table keeps its memory-bound register-blocked kernels.)
#include "src/backend/lowrank.h"

namespace lb::backend {

const LowrankKernels kCudaLowrank{generic_lowrank::project, generic_lowrank::expand, generic_lowrank::gram_add,
                                  generic_lowrank::gram_finish, generic_lowrank::leading_rows};

}  // namespace lb::backend
