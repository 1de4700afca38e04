// CPU-vs-CUDA parity of the fast Walsh–Hadamard transform (cuda/fwht.cu): along the last and
// a middle axis, blocks of 1 to 64 with zero padding, f32 and f64; the values are the same
// butterfly's on both devices. The backward (the same transform, truncated) too. Skips
// without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaFwht, ForwardAndBackwardMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (int64_t dim : {2, 1}) {
      for (int64_t k : {0, 2, 4, 6}) {
        const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + " B " +
                                 std::to_string(int64_t{1} << k);
        const Tensor x = testing::randn({3, 37, 21}, 111 + k, dt);
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
        const Tensor yc = fwht(xc, dim, k), yg = fwht(xg, dim, k);
        EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
        const Tensor g = testing::randn(yc.shape(), 112 + k, dt);
        yc.backward(g);
        yg.backward(g.to(kCuda));
        EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " dx";
      }
    }
  }
}

}  // namespace
}  // namespace lb
