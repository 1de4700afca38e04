// Test helpers: random tensors, closeness checks, finite-difference gradient checks and
// PyTorch golden fixtures.
#pragma once
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lb/core/philox.h"
#include "lb/core/tensor.h"
#include "lb/io/safetensors.h"

namespace lb::testing {

// Seeded normal/uniform tensors (f64 by default, for gradient checks).
Tensor randn(const Shape& shape, uint64_t seed, DType dtype = DType::F64);
Tensor rand(const Shape& shape, uint64_t seed, double lo, double hi, DType dtype = DType::F64);

// |a - b| <= atol + rtol |b| elementwise; the failure message names the worst element.
::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol);

// A result computed on a CUDA device against the CPU's: on the device, and close at the
// parity tolerances of the CUDA tests (f32 atol 1e-5 / rtol 1e-4, summation orders differ;
// f64 1e-12).
::testing::AssertionResult device_matches_cpu(const Tensor& on_device, const Tensor& cpu);

// ||actual - expected||₂ / max(||expected||₂, tiny): the error measure for model-level checks.
double rel_error(const Tensor& actual, const Tensor& expected);

// Central-difference gradient check of a scalar-valued function of `inputs` (f64 tensors,
// all with requires_grad set by the checker). The loss is Σ r ⊙ f(inputs) with fixed random
// r, so one backward gives the whole vector-Jacobian product. Each input element is
// perturbed by ±eps; the analytic and numeric gradients must agree within rtol/atol.
::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     std::vector<Tensor> inputs, double eps = 1e-6,
                                     double rtol = 1e-6, double atol = 1e-8);

// Golden fixtures written by tools/gen_golden.py (safetensors in tests/fixtures/).
std::string fixture_path(const std::string& name);  // LB_FIXTURES_DIR/name
// Loads tests/fixtures/<name>.safetensors (defined in fixtures.cpp; fails with a hint to
// run tools/gen_golden.py when missing).
io::SafetensorsFile load_fixture(const std::string& name);
// Root of ../shared/data, or "" when absent (tests then GTEST_SKIP).
std::string shared_data_dir();

// A fresh, empty directory under the system temp dir named after `tag`, the process and the
// running test; removed with the object.
class TempDir {
 public:
  explicit TempDir(const std::string& tag = "lb");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// The message of the lb::Error that f throws, or "(no error)".
std::string error_message(const std::function<void()>& f);

// Sets LEANBACK_ISA (null: unsets it) for one scope, so the kernels chosen at run time follow
// it, and restores what the environment had.
class ScopedIsa {
 public:
  explicit ScopedIsa(const char* value);
  ~ScopedIsa();
  ScopedIsa(const ScopedIsa&) = delete;
  ScopedIsa& operator=(const ScopedIsa&) = delete;

 private:
  bool had_ = false;
  std::string old_;
};

}  // namespace lb::testing
