// Test helpers (see testing.h).
#include "testing/testing.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include <unistd.h>

#include "lb/core/error.h"
#include "lb/ops.h"
#include "src/cpu/cpu_features.h"

namespace lb::testing {

Tensor randn(const Shape& shape, uint64_t seed, DType dtype) {
  PhiloxStream rng(seed);
  return rand_normal(shape, rng, 0.0, 1.0, dtype);
}

Tensor rand(const Shape& shape, uint64_t seed, double lo, double hi, DType dtype) {
  PhiloxStream rng(seed);
  return rand_uniform(shape, rng, lo, hi, dtype);
}

::testing::AssertionResult all_close(const Tensor& actual, const Tensor& expected, double rtol,
                                     double atol) {
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " vs expected "
                                         << shape_str(expected.shape());
  const auto a = actual.to_double_vector();
  const auto b = expected.to_double_vector();
  int64_t worst = -1, bad = 0;
  double worst_excess = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double tol = atol + rtol * std::abs(b[i]);
    const double err = std::abs(a[i] - b[i]);
    if (!(err <= tol)) {
      ++bad;
      const double excess = std::isnan(err) ? INFINITY : err - tol;
      if (worst < 0 || excess > worst_excess) {
        worst = static_cast<int64_t>(i);
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << a.size() << " elements differ; worst at flat index " << worst
         << ": " << a[worst] << " vs expected " << b[worst] << " (rtol " << rtol << ", atol "
         << atol << ")";
}

::testing::AssertionResult device_matches_cpu(const Tensor& on_device, const Tensor& cpu) {
  if (!on_device.device().is_cuda()) return ::testing::AssertionFailure() << "the result is not on a CUDA device";
  const bool f64 = cpu.dtype() == DType::F64;
  return all_close(on_device.to(Device::cpu()), cpu, f64 ? 1e-12 : 1e-4, f64 ? 1e-12 : 1e-5);
}

double rel_error(const Tensor& actual, const Tensor& expected) {
  const auto a = actual.to_double_vector();
  const auto b = expected.to_double_vector();
  LB_CHECK(a.size() == b.size(), "rel_error: sizes differ, ", shape_str(actual.shape()), " vs ",
           shape_str(expected.shape()));
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

::testing::AssertionResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                     std::vector<Tensor> inputs, double eps, double rtol,
                                     double atol) {
  for (auto& t : inputs) {
    if (t.dtype() != DType::F64)
      return ::testing::AssertionFailure() << "gradcheck needs f64 inputs, got " << t.str();
    t = t.detach().contiguous();
    if (!t.is_contiguous() || t.offset() != 0) t = t.clone();
    t.set_requires_grad(true);
  }
  Tensor y0;
  {
    NoGradGuard ng;
    y0 = f(inputs);
  }
  const Tensor r = randn(y0.shape(), 12345);
  auto loss_of = [&](const std::vector<Tensor>& in) {
    NoGradGuard ng;
    const auto y = f(in).to_double_vector();
    const auto rv = r.to_double_vector();
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += y[i] * rv[i];
    return s;
  };
  Tensor loss = sum(mul(f(inputs), r));
  loss.backward();
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    const Tensor g = x.grad();
    if (!g.defined()) return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    const auto ga = g.to_double_vector();
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double orig = p[i];
      p[i] = orig + eps;
      const double lp = loss_of(inputs);
      p[i] = orig - eps;
      const double lm = loss_of(inputs);
      p[i] = orig;
      const double num = (lp - lm) / (2 * eps);
      // The last term bounds the cancellation error of (lp - lm) / 2eps in f64.
      if (!(std::abs(num - ga[i]) <= atol + rtol * std::abs(num) + 1e-9 * (1 + std::abs(lp))))
        return ::testing::AssertionFailure()
               << "input " << k << " " << shape_str(x.shape()) << " element " << i
               << ": analytic " << ga[i] << " vs numeric " << num;
    }
  }
  return ::testing::AssertionSuccess();
}

std::string fixture_path(const std::string& name) { return std::string(LB_FIXTURES_DIR) + "/" + name; }

std::string shared_data_dir() {
  std::error_code ec;
  const std::filesystem::path p(LB_SHARED_DATA_DIR);
  return std::filesystem::is_directory(p, ec) ? std::filesystem::canonical(p, ec).string() : "";
}

TempDir::TempDir(const std::string& tag) {
  static int counter = 0;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
  if (info) name += std::string("_") + info->name();
  for (char& c : name)
    if (c == '/') c = '_';  // parameterised test names
  path_ = std::filesystem::temp_directory_path() / name;
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

ScopedIsa::ScopedIsa(const char* value) {
  const char* old = std::getenv("LEANBACK_ISA");
  had_ = old != nullptr;
  if (had_) old_ = old;
  if (value)
    setenv("LEANBACK_ISA", value, 1);
  else
    unsetenv("LEANBACK_ISA");
  cpu::reset_isa_cap_for_testing();
}

ScopedIsa::~ScopedIsa() {
  if (had_)
    setenv("LEANBACK_ISA", old_.c_str(), 1);
  else
    unsetenv("LEANBACK_ISA");
  cpu::reset_isa_cap_for_testing();
}

}  // namespace lb::testing
