// CPU-vs-CUDA parity of embedding (cuda/embedding.cu): the gather and the scatter-add
// gradient with repeated indices and a padding index, i32 and i64 indices, f32 and f64; an
// out-of-range index fails with the CPU's message. Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaEmbedding, GatherAndGradientMatchTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (DType it : {DType::I64, DType::I32}) {
      const std::string what = std::string(dtype_name(dt)) + " indices " + dtype_name(it);
      const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 0, 7, 3, 3, 1, 0, 9}, {2, 4}).to(it);
      const Tensor w = testing::randn({10, 6}, 81, dt);
      Tensor wc = w.clone().set_requires_grad(), wg = w.to(kCuda).set_requires_grad();
      const Tensor yc = embedding(idx, wc, /*padding_idx=*/0), yg = embedding(idx.to(kCuda), wg, 0);
      EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
      const Tensor g = testing::randn(yc.shape(), 82, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(wg.grad(), wc.grad())) << what << " d weight";
    }
  }
  const Tensor bad = Tensor::from_vector(std::vector<int64_t>{1, 2, 12, 3}, {4}).to(kCuda);
  try {
    embedding(bad, testing::randn({10, 6}, 83, DType::F32).to(kCuda));
    FAIL() << "an index out of range was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 12 at flat position 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lb
