// CPU-vs-CUDA parity of cross_entropy (ignore_index, label smoothing, i32/i64 targets, more
// classes than a block) and mse_loss, forward and backward; a target out of range fails with
// the CPU's message. f32 at atol 1e-5 / rtol 1e-4, f64 at 1e-12. Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaLosses, CrossEntropyAndMseMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (int64_t C : {int64_t{3}, int64_t{700}}) {
      for (double smoothing : {0.0, 0.1}) {
        const std::string what = std::string(dtype_name(dt)) + " C " + std::to_string(C) + " eps " + std::to_string(smoothing);
        const Tensor x = testing::randn({5, C}, 91, dt);
        const Tensor t = Tensor::from_vector(std::vector<int64_t>{0, 2, -100, 1, 2}, {5}).to(DType::I32);
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
        const Tensor lc = cross_entropy(xc, t, -100, smoothing), lg = cross_entropy(xg, t.to(kCuda), -100, smoothing);
        EXPECT_TRUE(testing::device_matches_cpu(lg, lc)) << what;
        lc.backward();
        lg.backward();
        EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " d logits";
      }
    }
    const Tensor a = testing::randn({4, 300}, 92, dt), b = testing::randn({4, 300}, 93, dt);
    Tensor ac = a.clone().set_requires_grad(), bc = b.clone().set_requires_grad();
    Tensor ag = a.to(kCuda).set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
    const Tensor mc = mse_loss(ac, bc), mg = mse_loss(ag, bg);
    EXPECT_TRUE(testing::device_matches_cpu(mg, mc)) << "mse " << dtype_name(dt);
    mc.backward();
    mg.backward();
    EXPECT_TRUE(testing::device_matches_cpu(ag.grad(), ac.grad())) << "mse d input";
    EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << "mse d target";
  }
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{0, 5}, {2}).to(kCuda);
  try {
    cross_entropy(testing::randn({2, 3}, 94, DType::F32).to(kCuda), bad);
    FAIL() << "a target out of range was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 5 at row 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lb
