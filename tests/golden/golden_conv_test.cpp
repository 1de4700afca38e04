// conv2d and the 2-D pools against PyTorch (fixtures from tools/golden/gen_conv.py): forward
// output and the gradients of sum(y * r) for every input, run in f32 and f64.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lb/ops.h"
#include "src/cpu/winograd_conv.h"
#include "testing/testing.h"

namespace lb {
namespace {

struct Tol {
  double rtol, atol;
};
Tol tol_for(DType d) { return d == DType::F32 ? Tol{1e-4, 1e-5} : Tol{1e-10, 1e-12}; }

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (double d : t.to_double_vector()) v.push_back(static_cast<int64_t>(d));
  return v;
}

// Loads `name` from the fixture as a leaf of dtype `dt` that requires grad.
Tensor leaf(const io::SafetensorsFile& f, const std::string& name, DType dt) {
  return f.at(name).to(dt).detach().contiguous().clone().set_requires_grad();
}

class GoldenConv : public ::testing::TestWithParam<DType> {};

TEST_P(GoldenConv, Conv2d) {
  const DType dt = GetParam();
  const Tol tol = tol_for(dt);
  for (const char* name : {"basic", "stride21_pad10", "dilation23_nobias", "groups2_stride2",
                           "depthwise", "1x1", "many_images"}) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture(std::string("conv_") + name);
    const auto a = ints(f.at("args"));
    ASSERT_EQ(a.size(), 7u);
    const Conv2dArgs args{{a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6]};
    Tensor x = leaf(f, "x", dt), w = leaf(f, "w", dt);
    Tensor b = f.find("b") ? leaf(f, "b", dt) : Tensor();
    const Tensor y = conv2d(x, w, b, args);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), tol.rtol, tol.atol));
    sum(mul(y, f.at("r").to(dt))).backward();
    EXPECT_TRUE(testing::all_close(x.grad(), f.at("gx"), tol.rtol, tol.atol));
    EXPECT_TRUE(testing::all_close(w.grad(), f.at("gw"), tol.rtol, tol.atol));
    if (b.defined()) EXPECT_TRUE(testing::all_close(b.grad(), f.at("gb"), tol.rtol, tol.atol));
  }
}

TEST_P(GoldenConv, Pools) {
  const DType dt = GetParam();
  const Tol tol = tol_for(dt);
  for (const std::string name :
       {"max_k2s2", "max_k3s2p1", "max_k32s12p11", "avg_k2s2", "avg_k3s2p1", "avg_k32s21p11",
        "adaptive_7x5_to_3x2", "adaptive_global", "adaptive_3x4_to_5x6"}) {
    SCOPED_TRACE(name);
    const auto f = testing::load_fixture("pool_" + name);
    const auto a = ints(f.at("args"));
    Tensor x = leaf(f, "x", dt);
    Tensor y;
    if (name.rfind("adaptive", 0) == 0) {
      ASSERT_EQ(a.size(), 2u);
      y = adaptive_avg_pool2d(x, a[0], a[1]);
    } else {
      ASSERT_EQ(a.size(), 6u);
      const Pool2dArgs args{{a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}};
      y = name.rfind("max", 0) == 0 ? max_pool2d(x, args) : avg_pool2d(x, args);
    }
    EXPECT_TRUE(testing::all_close(y, f.at("y"), tol.rtol, tol.atol));
    sum(mul(y, f.at("r").to(dt))).backward();
    EXPECT_TRUE(testing::all_close(x.grad(), f.at("gx"), tol.rtol, tol.atol));
  }
}

// conv2d's Winograd path (both tile layouts) against PyTorch directly, not only against im2col.
TEST_P(GoldenConv, Conv2dWinograd) {
  const DType dt = GetParam();
  const Tol tol = tol_for(dt);
  const auto f = testing::load_fixture("conv_winograd_c32");
  const auto a = ints(f.at("args"));
  const Conv2dArgs args{{a[0], a[1]}, {a[2], a[3]}, {a[4], a[5]}, a[6]};
  ASSERT_TRUE(detail::use_winograd(f.at("x").shape(), f.at("w").shape(), args));
  for (const auto layout : {detail::WinogradLayout::Rows, detail::WinogradLayout::Channels}) {
    SCOPED_TRACE(layout == detail::WinogradLayout::Rows ? "rows" : "channels");
    detail::set_winograd_layout(layout);
    Tensor x = leaf(f, "x", dt), w = leaf(f, "w", dt), b = leaf(f, "b", dt);
    const Tensor y = conv2d(x, w, b, args);
    EXPECT_TRUE(testing::all_close(y, f.at("y"), tol.rtol, tol.atol));
    sum(mul(y, f.at("r").to(dt))).backward();
    EXPECT_TRUE(testing::all_close(x.grad(), f.at("gx"), tol.rtol, tol.atol));
    EXPECT_TRUE(testing::all_close(w.grad(), f.at("gw"), tol.rtol, tol.atol));
    EXPECT_TRUE(testing::all_close(b.grad(), f.at("gb"), tol.rtol, tol.atol));
  }
  detail::set_winograd_layout(detail::WinogradLayout::Auto);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GoldenConv, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace lb
