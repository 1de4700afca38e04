// CPU-vs-CUDA parity of relu (cuda/relu.cu): values, the 1-bit mask's gradient, a length
// that is not a multiple of 8, zeros and NaN (both map to 0 with zero gradient), f32/f64.
// Skips without a CUDA device.
#include <gtest/gtest.h>

#include <limits>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(CudaRelu, ForwardAndBackwardMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const Device cuda = Device::cuda(0);
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> v = testing::randn({1003}, 101, DType::F64).to_double_vector();
    v[5] = 0.0;
    v[6] = std::numeric_limits<double>::quiet_NaN();
    const Tensor x = Tensor::from_vector(v, {17, 59}).to(dt);
    Tensor xc = x.clone().set_requires_grad(), xg = x.to(cuda).set_requires_grad();
    const Tensor yc = relu(xc), yg = relu(xg);
    EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << dtype_name(dt);
    const Tensor g = testing::randn({17, 59}, 102, dt);
    yc.backward(g);
    yg.backward(g.to(cuda));
    EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << dtype_name(dt) << " backward";
  }
}

}  // namespace
}  // namespace lb
