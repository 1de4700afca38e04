// CPU-vs-CUDA parity of batch_norm (cuda/batch_norm.cu): training (batch statistics, the
// running statistics updated in place, f32 buffers beside f64 data), eval, no affine
// parameters, 2-D and 4-D inputs; y and dx, dweight, dbias; f32 and f64. Skips without a
// CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaBatchNorm, TrainingEvalAndGradientsMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (const Shape& shape : {Shape{4, 5, 3, 7}, Shape{16, 6}}) {
      for (bool training : {true, false}) {
        for (bool affine : {true, false}) {
          const std::string what = std::string(dtype_name(dt)) + " " + shape_str(shape) +
                                   (training ? " training" : " eval") + (affine ? " affine" : " plain");
          const int64_t C = shape[1];
          const Tensor x = testing::randn(shape, 41, dt) * 2.0 + 0.5;
          Tensor w, b;
          if (affine) {
            w = testing::randn({C}, 42, dt);
            b = testing::randn({C}, 43, dt);
          }
          Tensor rm = testing::randn({C}, 44, DType::F32), rv = testing::rand({C}, 45, 0.5, 2.0, DType::F32);
          Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
          Tensor wc, wg, bc, bg;
          if (affine) {
            wc = w.clone().set_requires_grad();
            wg = w.to(kCuda).set_requires_grad();
            bc = b.clone().set_requires_grad();
            bg = b.to(kCuda).set_requires_grad();
          }
          Tensor rmc = rm.clone(), rvc = rv.clone(), rmg = rm.to(kCuda), rvg = rv.to(kCuda);
          const Tensor yc = batch_norm(xc, wc, bc, rmc, rvc, training, 0.1, 1e-5);
          const Tensor yg = batch_norm(xg, wg, bg, rmg, rvg, training, 0.1, 1e-5);
          EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
          EXPECT_TRUE(testing::device_matches_cpu(rmg, rmc)) << what << " running mean";
          EXPECT_TRUE(testing::device_matches_cpu(rvg, rvc)) << what << " running var";
          const Tensor g = testing::randn(shape, 46, dt);
          yc.backward(g);
          yg.backward(g.to(kCuda));
          EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " dx";
          if (affine) {
            EXPECT_TRUE(testing::device_matches_cpu(wg.grad(), wc.grad())) << what << " dweight";
            EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " dbias";
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace lb
