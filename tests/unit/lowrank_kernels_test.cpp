// INSTANT's low-rank kernels (src/backend/lowrank.h): the generic versions the CUDA table
// runs (tensor views + the device's GEMM table) against the CPU table's register-blocked
// kernels, on the CPU, for padded and padding-free (packed) batches in f32 and f64. With a
// GPU, the same checks run on the CUDA table (cuda_instant_test covers the strategy).
#include <gtest/gtest.h>

#include <vector>

#include "lb/ops.h"
#include "src/backend/lowrank.h"
#include "testing/testing.h"

namespace lb {
namespace {

using backend::LowrankKernels;

const LowrankKernels& kGeneric = backend::kGenericLowrank;

double tolerance(DType dt) { return dt == DType::F32 ? 2e-5 : 1e-12; }

struct Batch {
  Tensor x;                       // (B, L, C) or packed (1, N, C)
  std::vector<int64_t> offsets;   // packed: S + 1 offsets
  int64_t samples = 0, longest = 0;
  const std::vector<int64_t>* seq() const { return offsets.empty() ? nullptr : &offsets; }
};

Batch padded(int64_t B, int64_t L, int64_t C, DType dt, uint64_t seed) {
  return {testing::randn({B, L, C}, seed).to(dt), {}, B, L};
}
// Sequences of lengths 5, 0, 13, 1, 9 back to back (an empty one included).
Batch packed(int64_t C, DType dt, uint64_t seed) {
  Batch b;
  b.offsets = {0, 5, 5, 18, 19, 28};
  b.x = testing::randn({1, 28, C}, seed).to(dt);
  b.samples = 5;
  b.longest = 13;
  return b;
}

void check_project_and_expand(const LowrankKernels& k, const Batch& batch, int64_t Lp, const std::string& what) {
  const DType dt = batch.x.dtype();
  const int64_t R = 6, C = batch.x.size(2), S = batch.samples;
  const Tensor a = testing::randn({R, Lp}, 11).to(dt);
  Tensor want = Tensor::empty({R, S, C}, dt), got = Tensor::empty({R, S, C}, dt);
  Tensor want_bias = Tensor::empty({C}, dt), got_bias = Tensor::empty({C}, dt);
  backend::kCpuLowrank.project(a, batch.x, batch.seq(), want, want_bias);
  k.project(a, batch.x, batch.seq(), got, got_bias);
  EXPECT_LT(testing::rel_error(got, want), tolerance(dt)) << what << " projection";
  EXPECT_LT(testing::rel_error(got_bias, want_bias), tolerance(dt)) << what << " bias";
  EXPECT_LT(testing::rel_error(want_bias, sum(batch.x, {0, 1})), tolerance(dt)) << what << " bias is Σ x";

  const Tensor in = testing::randn({R, S, C}, 12).to(dt);
  Tensor want_out = Tensor::full(batch.x.shape(), 7.0, dt), got_out = Tensor::full(batch.x.shape(), 7.0, dt);
  backend::kCpuLowrank.expand(a, in, batch.seq(), want_out);
  k.expand(a, in, batch.seq(), got_out);
  EXPECT_LT(testing::rel_error(got_out, want_out), tolerance(dt)) << what << " expansion";
}

TEST(LowrankKernels, GenericProjectionsMatchTheCpuKernels) {
  for (DType dt : {DType::F32, DType::F64}) {
    const std::string name = dtype_name(dt);
    check_project_and_expand(kGeneric, padded(4, 10, 33, dt, 1), 10, name + " padded");
    check_project_and_expand(kGeneric, packed(33, dt, 2), 16, name + " packed");
  }
}

TEST(LowrankKernels, GenericGramsMatchTheCpuKernels) {
  for (DType dt : {DType::F32, DType::F64}) {
    const std::string name = dtype_name(dt);
    struct Case {
      Batch batch;
      bool token;
      int64_t n;
      const char* what;
    };
    const std::vector<Case> cases = {{padded(3, 12, 20, dt, 3), true, 12, "padded token"},
                                     {padded(3, 12, 20, dt, 4), true, 16, "padded token, zero-extended"},
                                     {padded(3, 12, 20, dt, 5), false, 20, "padded channel"},
                                     {packed(20, dt, 6), true, 16, "packed token"},
                                     {packed(20, dt, 7), false, 20, "packed channel"}};
    for (const Case& c : cases) {
      const std::string what = name + " " + c.what;
      Tensor want = testing::randn({c.n, c.n}, 8).to(dt), got = want.clone();  // accumulate onto something
      backend::kCpuLowrank.gram_add(want, c.batch.x, c.batch.seq(), c.token, 0.25);
      kGeneric.gram_add(got, c.batch.x, c.batch.seq(), c.token, 0.25);
      EXPECT_LT(testing::rel_error(got, want), tolerance(dt)) << what << " gram_add";
    }
    // The mean of three batches' sums, symmetric (the CPU mirrors the upper triangle, the
    // generic version averages both: the same for a symmetric sum).
    const Tensor r = testing::randn({9, 5}, 9).to(dt);
    Tensor want = matmul(r, r, false, true), got = want.clone();
    backend::kCpuLowrank.gram_finish(want, 3);
    kGeneric.gram_finish(got, 3);
    EXPECT_LT(testing::rel_error(got, want), tolerance(dt)) << name << " gram_finish";
    EXPECT_LT(testing::rel_error(want, mul_scalar(matmul(r, r, false, true), 1.0 / 3.0)), tolerance(dt));
    EXPECT_LT(testing::rel_error(got, got.transpose(0, 1).contiguous()), 1e-300) << "not symmetric";
  }
}

TEST(LowrankKernels, GenericLeadingRowsMatchTheCpuKernel) {
  for (DType dt : {DType::F32, DType::F64}) {
    const Tensor v = testing::randn({7, 7}, 10).to(dt);
    const Tensor want = backend::kCpuLowrank.leading_rows(v, 3, 0.5);
    const Tensor got = kGeneric.leading_rows(v, 3, 0.5);
    ASSERT_EQ(got.shape(), (Shape{3, 7}));
    EXPECT_LT(testing::rel_error(got, want), tolerance(dt)) << dtype_name(dt);
    // row r is column n-1-r, scaled
    EXPECT_DOUBLE_EQ(want.to(DType::F64).to_double_vector()[1 * 7 + 2],
                     0.5 * v.to(DType::F64).to_double_vector()[2 * 7 + 5]);
  }
}

}  // namespace
}  // namespace lb
