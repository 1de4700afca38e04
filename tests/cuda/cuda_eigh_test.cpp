// CPU-vs-CUDA parity of eigh (cuda/eigh.cu, cuSOLVER syevd): the eigenvalues match the
// CPU's; the eigenvectors (defined up to sign) reconstruct a = V diag(λ) Vᵀ and each matches
// the CPU's column up to its sign; only the upper triangle is read; a non-finite entry fails
// with the CPU's message. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/core/cuda_runtime_info.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

const Device kCuda = Device::cuda(0);

TEST(CudaEigh, MatchesTheCpuUpToEigenvectorSigns) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (CUDA built: " << cuda_compiled() << ")";
  for (DType dt : {DType::F32, DType::F64}) {
    const int64_t n = 24;
    const Tensor r = testing::randn({n, n}, 101, DType::F64);
    Tensor a = matmul(r, r.transpose(0, 1)).to(dt);  // symmetric positive definite, distinct eigenvalues
    Tensor lower_garbage = a.clone();
    for (int64_t i = 1; i < n; ++i) lower_garbage.slice(0, i, i + 1).slice(1, 0, i).fill_(1e3);
    const EighResult c = eigh(a);
    const EighResult g = eigh(lower_garbage.to(kCuda));
    const double tol = dt == DType::F32 ? 2e-3 : 1e-10;
    const Tensor wg = g.eigenvalues.to(Device::cpu()).to(DType::F64), wc = c.eigenvalues.to(DType::F64);
    EXPECT_LT(testing::rel_error(wg, wc), tol) << dtype_name(dt) << " eigenvalues";
    const Tensor vg = g.eigenvectors.to(Device::cpu()).to(DType::F64), vc = c.eigenvectors.to(DType::F64);
    for (int64_t k = 0; k < n; ++k) {
      const Tensor colg = vg.slice(1, k, k + 1), colc = vc.slice(1, k, k + 1);
      const double dot = sum(colg * colc).item_double();
      EXPECT_GT(std::abs(dot), 1.0 - 10 * tol) << dtype_name(dt) << " eigenvector " << k;
    }
    const Tensor rebuilt = matmul(vg * wg.reshape({1, n}), vg.transpose(0, 1));
    EXPECT_LT(testing::rel_error(rebuilt, a.to(DType::F64)), 10 * tol) << dtype_name(dt) << " reconstruction";
  }
  Tensor bad = Tensor::zeros({4, 4}, DType::F32, kCuda);
  bad.slice(0, 1, 2).slice(1, 2, 3).fill_(NAN);
  try {
    eigh(bad);
    FAIL() << "a NaN in the upper triangle was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite entry at (1, 2)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lb
