// CPU-vs-CUDA parity of dropout: from the same Philox stream position the device keeps
// exactly the elements the CPU keeps (outputs equal bit for bit), the backward applies the
// same mask, and both streams advance by the same number of draws. Skips without a device.
#include <gtest/gtest.h>

#include "lb/core/cuda_runtime_info.h"
#include "lb/core/philox.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(CudaDropout, KeepsTheSameElementsAsTheCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  const Device cuda = Device::cuda(0);
  for (DType dt : {DType::F32, DType::F64})
    for (int64_t n : {int64_t{1}, int64_t{13}, int64_t{4099}, int64_t{70000}})
      for (double p : {0.1, 0.5, 1.0}) {
        const Tensor x = testing::randn({n}, 101, dt), g = testing::randn({n}, 102, dt);
        PhiloxStream rc(77, 3, 5), rg(77, 3, 5);  // an offset that is not a multiple of 4
        Tensor xc = x.clone().set_requires_grad(), xg = x.to(cuda).set_requires_grad();
        const Tensor yc = dropout(xc, p, true, rc), yg = dropout(xg, p, true, rg);
        const std::string what = std::string(dtype_name(dt)) + " n " + std::to_string(n) + " p " + std::to_string(p);
        EXPECT_EQ(yg.to(Device::cpu()).to_double_vector(), yc.to_double_vector()) << what;
        yc.backward(g);
        yg.backward(g.to(cuda));
        EXPECT_EQ(xg.grad().to(Device::cpu()).to_double_vector(), xc.grad().to_double_vector()) << what;
        EXPECT_EQ(rg.offset(), rc.offset()) << what;
      }
}

}  // namespace
}  // namespace lb
