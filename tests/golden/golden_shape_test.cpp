// concat, index_select and fwht against PyTorch (fixtures from tools/golden/gen_shape.py;
// fwht's reference there is an explicit Sylvester-matrix product): forward output and input
// gradients of sum(y * r), run in f32 and f64.
#include <gtest/gtest.h>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType d) { return d == DType::F32 ? Tol{1e-4, 1e-5} : Tol{1e-10, 1e-12}; }

class GoldenShape : public ::testing::TestWithParam<DType> {
 protected:
  Tensor input(const io::SafetensorsFile& f, const char* name) {
    Tensor t = f.at(name).to(GetParam()).contiguous();
    t.set_requires_grad();
    return t;
  }
  void check(const io::SafetensorsFile& f, const Tensor& y,
             const std::vector<std::pair<Tensor, const char*>>& grads) {
    const Tol t = tol_for(GetParam());
    EXPECT_EQ(y.dtype(), GetParam());
    EXPECT_TRUE(testing::all_close(y, f.at("y"), t.rtol, t.atol));
    sum(mul(y, f.at("r").to(GetParam()))).backward();
    for (const auto& [x, name] : grads) {
      SCOPED_TRACE(name);
      EXPECT_TRUE(testing::all_close(x.grad(), f.at(name), t.rtol, t.atol));
    }
  }
};

TEST_P(GoldenShape, Concat) {
  {
    const auto f = testing::load_fixture("shape_concat_dim1");
    Tensor a = input(f, "a"), b = input(f, "b"), c = input(f, "c");
    check(f, concat({a, b, c}, 1), {{a, "ga"}, {b, "gb"}, {c, "gc"}});
  }
  {
    const auto f = testing::load_fixture("shape_concat_dim0");
    Tensor a = input(f, "a"), b = input(f, "b");
    check(f, concat({a, b}, 0), {{a, "ga"}, {b, "gb"}});
  }
}

TEST_P(GoldenShape, IndexSelect) {
  {
    const auto f = testing::load_fixture("shape_index_select_dim0");
    EXPECT_EQ(f.at("index").dtype(), DType::I64);
    Tensor x = input(f, "x");
    check(f, index_select(x, 0, f.at("index")), {{x, "gx"}});
  }
  {
    const auto f = testing::load_fixture("shape_index_select_dim1");
    EXPECT_EQ(f.at("index").dtype(), DType::I32);
    Tensor x = input(f, "x");
    check(f, index_select(x, 1, f.at("index")), {{x, "gx"}});
  }
}

TEST_P(GoldenShape, Fwht) {
  for (const char* name : {"shape_fwht_last_pad", "shape_fwht_mid", "shape_fwht_first_k3"}) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture(name);
    Tensor x = input(f, "x");
    const int64_t dim = f.at("dim").item<int64_t>(), k = f.at("block_log2").item<int64_t>();
    check(f, fwht(x, dim, k), {{x, "gx"}});
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenShape, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lb
