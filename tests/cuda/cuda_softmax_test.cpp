// CPU-vs-CUDA parity of softmax and log_softmax (cuda/softmax.cu) forward and backward: rows
// shorter and longer than a block, another axis than the last, an additive key-padding mask
// broadcast over heads and queries (its gradient summed back), and fully masked rows (0 /
// -inf, zero gradient, as on the CPU). f32 at atol 1e-5 / rtol 1e-4, f64 at 1e-12. Skips
// without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

class CudaSoftmax : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  }
};

TEST_F(CudaSoftmax, ForwardAndBackwardMatchTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    for (bool log : {false, true}) {
      for (const Shape& shape : std::vector<Shape>{{3, 5}, {2, 700}, {4, 3, 9}}) {
        for (int64_t dim : {int64_t{-1}, int64_t{0}}) {
          const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt) + " " +
                                   shape_str(shape) + " dim " + std::to_string(dim);
          const Tensor x = testing::randn(shape, 51, dt);
          Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
          const Tensor yc = log ? log_softmax(xc, dim) : softmax(xc, dim);
          const Tensor yg = log ? log_softmax(xg, dim) : softmax(xg, dim);
          EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
          const Tensor g = testing::randn(shape, 52, dt);
          yc.backward(g);
          yg.backward(g.to(kCuda));
          EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " backward";
        }
      }
    }
  }
}

TEST_F(CudaSoftmax, KeyPaddingMaskAndFullyMaskedRowsMatchTheCpu) {
  // Scores (B=2, H=3, T=4, T=4) with a (B, 1, 1, T) mask: batch 0 keeps 3 keys, batch 1 none.
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F64}) {
    for (bool log : {false, true}) {
      const Tensor x = testing::randn({2, 3, 4, 4}, 61, dt);
      const Tensor mask = Tensor::from_vector(std::vector<double>{0, 0, 0, -inf, -inf, -inf, -inf, -inf}, {2, 1, 1, 4}).to(dt);
      Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
      Tensor mc = mask.clone().set_requires_grad(), mg = mask.to(kCuda).set_requires_grad();
      const Tensor yc = log ? log_softmax(xc, -1, mc) : softmax(xc, -1, mc);
      const Tensor yg = log ? log_softmax(xg, -1, mg) : softmax(xg, -1, mg);
      const std::string what = std::string(log ? "log_softmax " : "softmax ") + dtype_name(dt);
      // -inf entries (log_softmax of a fully masked row) must match exactly
      const std::vector<double> a = yg.to(Device::cpu()).to_double_vector(), b = yc.to_double_vector();
      const double rtol = dt == DType::F64 ? 1e-12 : 1e-4, atol = dt == DType::F64 ? 1e-12 : 1e-5;
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::isinf(b[i])) EXPECT_EQ(a[i], b[i]) << what << " [" << i << "]";
        else EXPECT_NEAR(a[i], b[i], atol + rtol * std::abs(b[i])) << what << " [" << i << "]";
      }
      const Tensor g = testing::randn(yc.shape(), 62, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " d x";
      EXPECT_TRUE(testing::device_matches_cpu(mg.grad(), mc.grad())) << what << " d mask";
    }
  }
}

}  // namespace
}  // namespace lb
