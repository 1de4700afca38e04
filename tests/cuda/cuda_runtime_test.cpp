// CUDA runtime pieces that exist so far: device discovery, host<->device copies, and the
// device allocator's accounting (its logic: caching_allocator_test). Skips cleanly without a GPU (or without a CUDA build).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "lb/core/cuda_runtime_info.h"
#include "lb/nn/backward/factory.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(CudaRuntime, DeviceCountNeverThrows) {
  EXPECT_GE(cuda_device_count(), 0);
  EXPECT_EQ(cuda_device_names().size(), static_cast<size_t>(cuda_device_count()));
  if (!cuda_compiled()) EXPECT_EQ(cuda_device_count(), 0);
}

TEST(CudaRuntime, CopyRoundTripAndAccounting) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Tensor x = testing::randn({3, 5, 7}, 1, DType::F32);
  const int64_t before = allocator_for(Device::cuda(0)).stats().total_current;
  {
    Tensor d = x.transpose(0, 2).to(Device::cuda(0));
    EXPECT_TRUE(d.device().is_cuda());
    EXPECT_EQ(allocator_for(Device::cuda(0)).stats().total_current - before,
              static_cast<int64_t>(x.nbytes()));
    EXPECT_EQ(d.to(Device::cpu()).to_double_vector(), x.transpose(0, 2).to_double_vector());
  }
  EXPECT_EQ(allocator_for(Device::cuda(0)).stats().total_current, before);
}

// Host-to-device copies go through a ring of pinned staging slots without waiting: more
// copies than slots, each host source overwritten right after its copy returns, and a copy
// larger than the staging limit (direct) all arrive intact.
TEST(CudaRuntime, StagedHostToDeviceCopiesArriveIntact) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  std::vector<Tensor> on_device;
  std::vector<std::vector<double>> expected;
  for (int i = 0; i < 20; ++i) {
    Tensor host = testing::randn({257 + i, 33}, 100 + static_cast<uint64_t>(i)).to(DType::F32);
    expected.push_back(host.to_double_vector());
    on_device.push_back(host.to(Device::cuda(0)));
    host.fill_(-1.0);  // the copy must already have taken its own snapshot
  }
  Tensor big = Tensor::full({(int64_t{65} << 20) / 4}, 3.0, DType::F32);
  const Tensor big_device = big.to(Device::cuda(0));
  for (size_t i = 0; i < on_device.size(); ++i)
    EXPECT_EQ(on_device[i].to(Device::cpu()).to_double_vector(), expected[i]) << "copy " << i;
  const std::vector<double> back = big_device.to(Device::cpu()).to_double_vector();
  EXPECT_EQ(std::count(back.begin(), back.end(), 3.0), big.numel());
}

TEST(CudaRuntime, CpuOnlyStrategiesRejectDeviceTensorsClearly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const Tensor x = Tensor::zeros({2, 3, 16}).to(Device::cuda(0)), w = Tensor::zeros({8, 16}).to(Device::cuda(0));
  auto expect_refused = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      FAIL() << what << " accepted a CUDA tensor";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("run on the CPU only so far"), std::string::npos) << e.what();
    }
  };
  // Both strategies run on CUDA, Conv2d layers through the token view; HOT's f64 emulation
  // oracle is CPU code.
  const Tensor image = Tensor::zeros({1, 2, 4, 4}).to(Device::cuda(0)), w2d = Tensor::zeros({3, 18}).to(Device::cuda(0));
  nn::backward::ConvGeometry cg;
  cg.x_shape = image.shape();
  cg.kH = cg.kW = 3;
  cg.args.padding = {1, 1};
  cg.Ho = cg.Wo = 4;
  for (const char* type : {"instant", "hot"}) {
    auto s = nn::backward::make_strategy({{"type", type}}, "backward.strategies.test");
    EXPECT_NO_THROW(s->save(x, w)) << type;
    EXPECT_TRUE(s->save_conv(image, w2d, cg).token_view) << type;
  }
  auto emulated = nn::backward::make_strategy({{"type", "hot"}, {"emulate", true}}, "backward.strategies.test");
  expect_refused([&] { emulated->save(x, w); }, "hot's emulation");
}

}  // namespace
}  // namespace lb
