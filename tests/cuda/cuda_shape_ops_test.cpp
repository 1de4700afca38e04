// CPU-vs-CUDA parity of concat and index_select (cuda/shape_ops.cu): every axis, contiguous
// and transposed inputs, a byte dtype with odd row sizes (the narrow-word gather), repeated
// indices in the backward's scatter-add, i32 and i64 indices; an out-of-range index fails
// with the CPU's message. Skips without a CUDA device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaShapeOps, ConcatMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (int64_t dim = 0; dim < 3; ++dim) {
      const std::string what = std::string(dtype_name(dt)) + " dim " + std::to_string(dim);
      Shape sa{2, 3, 4}, sb{2, 3, 4};
      sb[dim] = 5;
      const Tensor a = testing::randn(sa, 51, dt);
      const Tensor b = testing::randn({sb[0], sb[2], sb[1]}, 52, dt);  // used transposed: strided
      Tensor ac = a.clone().set_requires_grad(), ag = a.to(kCuda).set_requires_grad();
      Tensor bc = b.clone().set_requires_grad(), bg = b.to(kCuda).set_requires_grad();
      const Tensor yc = concat({ac, bc.transpose(1, 2)}, dim), yg = concat({ag, bg.transpose(1, 2)}, dim);
      EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
      const Tensor g = testing::randn(yc.shape(), 53, dt);
      yc.backward(g);
      yg.backward(g.to(kCuda));
      EXPECT_TRUE(testing::device_matches_cpu(ag.grad(), ac.grad())) << what << " da";
      EXPECT_TRUE(testing::device_matches_cpu(bg.grad(), bc.grad())) << what << " db";
    }
  }
  const Tensor i = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor yi = concat({i.to(kCuda), i.to(kCuda)}, 1).to(Device::cpu());
  const std::vector<int64_t> want{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
  for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(yi.data<int64_t>()[k], want[k]) << "i64 concat at " << k;
}

TEST(CudaShapeOps, IndexSelectMatchesTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    for (DType it : {DType::I64, DType::I32}) {
      for (int64_t dim = 0; dim < 3; ++dim) {
        const std::string what = std::string(dtype_name(dt)) + " " + dtype_name(it) + " dim " + std::to_string(dim);
        const Tensor x = testing::randn({4, 5, 8}, 61, dt);
        const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 0, 3, 1, 3}, {5}).to(it);
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(kCuda).set_requires_grad();
        const Tensor yc = index_select(xc, dim, idx), yg = index_select(xg, dim, idx.to(kCuda));
        EXPECT_TRUE(testing::device_matches_cpu(yg, yc)) << what;
        const Tensor g = testing::randn(yc.shape(), 62, dt);
        yc.backward(g);
        yg.backward(g.to(kCuda));
        EXPECT_TRUE(testing::device_matches_cpu(xg.grad(), xc.grad())) << what << " dx";
      }
    }
  }
  // Bytes with rows of 3: the one-byte gather.
  const Tensor u = testing::rand({4, 3}, 63, 0.0, 200.0, DType::F32).to(DType::U8);
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 2, 0}, {3});
  const Tensor uc = index_select(u, 0, idx), ug = index_select(u.to(kCuda), 0, idx.to(kCuda)).to(Device::cpu());
  for (int64_t k = 0; k < uc.numel(); ++k) EXPECT_EQ(uc.data<uint8_t>()[k], ug.data<uint8_t>()[k]) << "u8 at " << k;
  try {
    index_select(testing::randn({4, 3}, 64, DType::F32).to(kCuda), 0,
                 Tensor::from_vector(std::vector<int64_t>{1, 4}, {2}).to(kCuda));
    FAIL() << "an index out of range was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index[1] = 4 is out of range"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lb
