// CPU-vs-CUDA parity of layer_norm (cuda/layer_norm.cu) forward and backward: rows shorter
// and longer than a block, with and without weight and bias, and a non-contiguous input.
// f32 at atol 1e-5 / rtol 1e-4, f64 at 1e-12. Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaLayerNorm, ForwardAndBackwardMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (const Shape& shape : std::vector<Shape>{{2, 3, 8}, {5, 1000}}) {
      for (bool affine : {true, false}) {
        const std::string what = std::string(dtype_name(dt)) + " " + shape_str(shape) + (affine ? " affine" : "");
        const int64_t C = shape.back();
        const Tensor x = testing::randn(shape, 71, dt), w = testing::randn({C}, 72, dt), b = testing::randn({C}, 73, dt);
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
        Tensor wc = w.clone().set_requires_grad(), wg = w.to(kCuda).set_requires_grad();
        Tensor bc = b.clone().set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
        const Tensor yc = affine ? layer_norm(xc, wc, bc) : layer_norm(xc, Tensor(), Tensor());
        const Tensor yg = affine ? layer_norm(xg, wg, bg) : layer_norm(xg, Tensor(), Tensor());
        EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
        const Tensor g = testing::randn(shape, 74, dt);
        yc.backward(g);
        yg.backward(g.to(kCuda));
        EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " d x";
        if (affine) {
          EXPECT_TRUE(testing::device_matches_cpu(wg.grad(), wc.grad())) << what << " d w";
          EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " d b";
        }
      }
    }
    // A transposed (non-contiguous) input.
    const Tensor x = testing::randn({6, 4}, 75, dt), w = testing::randn({6}, 76, dt), b = testing::randn({6}, 77, dt);
    EXPECT_TRUE(testing::device_matches_cpu(layer_norm(x.to(kCuda).transpose(0, 1), w.to(kCuda), b.to(kCuda)),
                      layer_norm(x.transpose(0, 1), w, b)))
        << "transposed";
  }
}

}  // namespace
}  // namespace lb
