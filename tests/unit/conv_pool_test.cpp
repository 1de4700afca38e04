// conv2d and the 2-D pools: f64 finite-difference gradchecks across stride / padding /
// dilation / groups (depthwise, 1×1), values and gradients against a naive direct
// convolution written out here (independent of im2col), saved-bytes accounting, errors.
#include <gtest/gtest.h>

#include <cmath>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct ConvCase {
  const char* name;
  Shape x, w;
  Conv2dArgs args;
  bool bias = true;
};

const std::vector<ConvCase>& conv_cases() {
  static const std::vector<ConvCase> cases = {
      {"3x3_pad1", {2, 3, 5, 5}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {"2x3_stride2_pad10", {2, 2, 6, 7}, {3, 2, 2, 3}, {{2, 2}, {1, 0}, {1, 1}, 1}},
      {"stride_21_no_bias", {1, 2, 7, 6}, {2, 2, 3, 2}, {{2, 1}, {0, 1}, {1, 1}, 1}, false},
      {"dilation_21", {2, 2, 7, 6}, {3, 2, 3, 3}, {{1, 1}, {2, 1}, {2, 1}, 1}},
      {"dilation_stride", {1, 3, 8, 8}, {2, 3, 2, 2}, {{2, 3}, {1, 2}, {3, 2}, 1}},
      {"groups2", {2, 4, 5, 5}, {6, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 2}},
      {"groups3_stride2", {1, 6, 6, 5}, {3, 2, 3, 2}, {{2, 2}, {1, 1}, {1, 1}, 3}},
      {"depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 3}},
      {"depthwise_x2", {1, 3, 5, 4}, {6, 1, 3, 3}, {{2, 1}, {1, 1}, {1, 1}, 3}},
      {"1x1", {2, 3, 4, 4}, {5, 3, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}},
      {"1x1_groups", {2, 4, 3, 3}, {4, 2, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 2}},
      {"1x1_stride2", {2, 3, 5, 5}, {4, 3, 1, 1}, {{2, 2}, {0, 0}, {1, 1}, 1}},
      {"1x1_pad1", {1, 2, 3, 3}, {3, 2, 1, 1}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {"kernel_equals_input", {2, 2, 3, 3}, {3, 2, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}},
  };
  return cases;
}

// Direct convolution in f64 (the definition, loops only).
struct NaiveConv {
  std::vector<double> y, dx, dw, db;
};
NaiveConv naive_conv(const Tensor& xt, const Tensor& wt, const Tensor& bt, const Conv2dArgs& a,
                     const Tensor& gt) {
  const auto x = xt.to_double_vector(), w = wt.to_double_vector();
  const auto b = bt.defined() ? bt.to_double_vector() : std::vector<double>();
  const int64_t N = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  const int64_t Co = wt.size(0), Cg = wt.size(1), kH = wt.size(2), kW = wt.size(3);
  const int64_t Cog = Co / a.groups;
  const int64_t Ho = (H + 2 * a.padding[0] - a.dilation[0] * (kH - 1) - 1) / a.stride[0] + 1;
  const int64_t Wo = (W + 2 * a.padding[1] - a.dilation[1] * (kW - 1) - 1) / a.stride[1] + 1;
  const std::vector<double> g =
      gt.defined() ? gt.to_double_vector() : std::vector<double>(N * Co * Ho * Wo, 0.0);
  NaiveConv r;
  r.y.assign(N * Co * Ho * Wo, 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(Co, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow) {
          const int64_t o = ((n * Co + co) * Ho + oh) * Wo + ow;
          double acc = b.empty() ? 0.0 : b[co];
          r.db[co] += g[o];
          for (int64_t cg = 0; cg < Cg; ++cg) {
            const int64_t c = (co / Cog) * Cg + cg;
            for (int64_t i = 0; i < kH; ++i)
              for (int64_t j = 0; j < kW; ++j) {
                const int64_t ih = oh * a.stride[0] - a.padding[0] + i * a.dilation[0];
                const int64_t iw = ow * a.stride[1] - a.padding[1] + j * a.dilation[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const int64_t xi = ((n * C + c) * H + ih) * W + iw;
                const int64_t wi = ((co * Cg + cg) * kH + i) * kW + j;
                acc += x[xi] * w[wi];
                r.dx[xi] += w[wi] * g[o];
                r.dw[wi] += x[xi] * g[o];
              }
          }
          r.y[o] = acc;
        }
  return r;
}

Tensor f64_tensor(const std::vector<double>& v, const Shape& s) {
  return Tensor::from_vector<double>(v, s);
}

TEST(Conv2d, GradcheckAllCases) {
  uint64_t seed = 100;
  for (const auto& c : conv_cases()) {
    const Tensor x = testing::randn(c.x, ++seed);
    const Tensor w = testing::randn(c.w, ++seed);
    const Conv2dArgs a = c.args;
    if (c.bias) {
      const Tensor b = testing::randn({c.w[0]}, ++seed);
      EXPECT_TRUE(testing::gradcheck([a](auto& v) { return conv2d(v[0], v[1], v[2], a); },
                                     {x, w, b}))
          << c.name;
    } else {
      EXPECT_TRUE(testing::gradcheck([a](auto& v) { return conv2d(v[0], v[1], Tensor(), a); },
                                     {x, w}))
          << c.name;
    }
  }
}

// Values and all three gradients against the direct loops, for the small-image cases (several
// images per GEMM) and for 32×32 images (one image per GEMM, in place; 1×1 skips im2col).
TEST(Conv2d, MatchesDirectConvolution) {
  std::vector<ConvCase> cases = conv_cases();
  cases.push_back({"32x32_3x3", {3, 3, 32, 32}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"32x32_1x1", {3, 4, 32, 32}, {5, 4, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}});
  cases.push_back({"32x32_1x1_groups", {2, 4, 32, 32}, {6, 2, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 2}});
  cases.push_back({"33x35_groups_dil", {2, 4, 33, 35}, {4, 2, 3, 3}, {{1, 1}, {2, 2}, {2, 2}, 2}});
  cases.push_back({"many_small", {37, 3, 4, 4}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  // Large enough to split images over threads: one image per GEMM, chunks of several images
  // (uneven last chunk), and the direct 1×1 path.
  cases.push_back({"threads_3x3", {4, 8, 32, 32}, {8, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"threads_chunks", {64, 8, 6, 6}, {16, 8, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"threads_1x1", {9, 16, 32, 32}, {16, 16, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}});
  // Output widths with fixed-width im2col/col2im kernels (4, 8, 16, 32), with the input as
  // wide as the output or wider.
  cases.push_back({"width8_valid", {2, 3, 6, 10}, {4, 3, 3, 3}, {{1, 1}, {0, 0}, {1, 1}, 1}});
  cases.push_back({"width16_same", {1, 2, 5, 16}, {3, 2, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"width16_valid", {1, 2, 5, 17}, {3, 2, 3, 2}, {{1, 1}, {0, 0}, {1, 1}, 1}});
  cases.push_back({"width4_dilated", {2, 2, 6, 8}, {3, 2, 2, 3}, {{1, 1}, {0, 0}, {1, 2}, 1}});
  // Deep enough (K = 288) that one image is split into tiles of output rows (uneven last).
  cases.push_back({"row_tiles", {2, 32, 33, 32}, {8, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}});
  cases.push_back({"row_tiles_s2", {1, 32, 64, 64}, {8, 32, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, 1}});
  uint64_t seed = 500;
  for (const auto& c : cases) {
    for (DType dt : {DType::F64, DType::F32}) {
      const Tensor x = testing::randn(c.x, ++seed, dt).set_requires_grad();
      const Tensor w = testing::randn(c.w, ++seed, dt).set_requires_grad();
      Tensor b;
      if (c.bias) b = testing::randn({c.w[0]}, ++seed, dt).set_requires_grad();
      const Tensor y = conv2d(x, w, b, c.args);
      const Tensor g = testing::randn(y.shape(), ++seed, dt);
      y.backward(g);
      const NaiveConv r = naive_conv(x, w, b, c.args, g);
      const double rtol = dt == DType::F64 ? 1e-12 : 1e-4, atol = dt == DType::F64 ? 1e-12 : 1e-4;
      EXPECT_TRUE(testing::all_close(y, f64_tensor(r.y, y.shape()), rtol, atol)) << c.name;
      EXPECT_TRUE(testing::all_close(x.grad(), f64_tensor(r.dx, x.shape()), rtol, atol)) << c.name;
      EXPECT_TRUE(testing::all_close(w.grad(), f64_tensor(r.dw, w.shape()), rtol, atol)) << c.name;
      if (c.bias)
        EXPECT_TRUE(testing::all_close(b.grad(), f64_tensor(r.db, b.shape()), rtol, atol))
            << c.name;
    }
  }
}

TEST(Conv2d, NonContiguousInputAndPartialGrads) {
  // x as a permuted view; only w needs a gradient (so only x is saved), then only x.
  const Tensor base = testing::randn({5, 5, 2, 3}, 7);
  const Tensor x = base.permute({2, 3, 0, 1});  // (2, 3, 5, 5), non-contiguous
  ASSERT_FALSE(x.is_contiguous());
  const Tensor w = testing::randn({4, 3, 3, 3}, 8);
  const Conv2dArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  const Tensor g = testing::randn({2, 4, 5, 5}, 9);
  const NaiveConv r = naive_conv(x, w, Tensor(), a, g);
  {
    Tensor wl = w.clone().set_requires_grad();
    conv2d(x, wl, Tensor(), a).backward(g);
    EXPECT_TRUE(testing::all_close(wl.grad(), f64_tensor(r.dw, w.shape()), 1e-12, 1e-12));
  }
  {
    Tensor xl = x.contiguous().set_requires_grad();
    conv2d(xl, w, Tensor(), a).backward(g);
    EXPECT_TRUE(testing::all_close(xl.grad(), f64_tensor(r.dx, x.shape()), 1e-12, 1e-12));
  }
}

TEST(Conv2d, SavesOnlyInputAndWeight) {
  const int64_t before = autograd::saved_bytes();
  Tensor x = testing::randn({2, 3, 8, 8}, 1, DType::F32).set_requires_grad();
  Tensor w = testing::randn({4, 3, 3, 3}, 2, DType::F32).set_requires_grad();
  Tensor b = testing::randn({4}, 3, DType::F32).set_requires_grad();
  Tensor y = conv2d(x, w, b, {{1, 1}, {1, 1}, {1, 1}, 1});
  EXPECT_EQ(autograd::saved_bytes() - before, static_cast<int64_t>(x.nbytes() + w.nbytes()));
  y.backward(Tensor::ones(y.shape()));
  EXPECT_EQ(autograd::saved_bytes(), before);
  // Only the bias trains: nothing is saved.
  Tensor xd = x.detach(), wd = w.detach();
  Tensor y2 = conv2d(xd, wd, b, {{1, 1}, {1, 1}, {1, 1}, 1});
  EXPECT_EQ(autograd::saved_bytes(), before);
  y2.backward(Tensor::ones(y2.shape()));
  // Two backward passes so far, each adding N·Ho·Wo = 2·64 ones.
  EXPECT_TRUE(testing::all_close(b.grad(), Tensor::full({4}, 2 * 2 * 64.0), 0, 0));
}

TEST(Conv2d, Im2colCol2imAreAdjoint) {
  // <im2col(x), c> == <x, col2im(c)> for random x, c: col2im is im2col's transpose.
  const Conv2dArgs a{{2, 1}, {1, 2}, {1, 2}, 1};
  const int64_t C = 2, H = 6, W = 7, kH = 3, kW = 2;
  const int64_t Ho = (H + 2 - 2 * 1 - 1) / 2 + 1, Wo = (W + 4 - 2 * 1 - 1) / 1 + 1;
  const Tensor x = testing::randn({C, H, W}, 41);
  const Tensor c = testing::randn({C * kH * kW, Ho * Wo}, 42);
  Tensor cols = Tensor::empty({C * kH * kW, Ho * Wo}, DType::F64);
  im2col(x.data<double>(), C, H, W, kH, kW, a, cols.data<double>());
  Tensor dx = Tensor::zeros({C, H, W}, DType::F64);
  col2im(c.data<double>(), C, H, W, kH, kW, a, dx.data<double>());
  const double lhs = sum(mul(cols, c)).item<double>(), rhs = sum(mul(x, dx)).item<double>();
  EXPECT_NEAR(lhs, rhs, 1e-10 * (1 + std::abs(lhs)));
  // The f32 entry point agrees with the f64 one.
  const Tensor x32 = x.to(DType::F32);
  Tensor cols32 = Tensor::empty({C * kH * kW, Ho * Wo}, DType::F32);
  im2col(x32.data<float>(), C, H, W, kH, kW, a, cols32.data<float>());
  EXPECT_TRUE(testing::all_close(cols32, cols, 1e-6, 1e-6));
}

template <typename F>
void expect_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& s : needles)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what();
  }
}

TEST(Conv2d, Errors) {
  const Tensor x = Tensor::zeros({2, 4, 5, 5});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 3, 3, 3})); },
               {"channel mismatch", "(2, 4, 5, 5)", "(3, 3, 3, 3)"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 2, 3, 3}), Tensor(), {.groups = 2}); },
               {"groups = 2", "C_out = 3"});
  expect_error([&] { conv2d(x, Tensor::zeros({4, 4, 3, 3}), Tensor(), {.groups = 3}); },
               {"groups = 3", "C_in = 4"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 4, 6, 3})); },
               {"larger than the padded input", "(5, 5)"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 4, 3, 3}), Tensor(), {.dilation = {3, 1}}); },
               {"dilation", "(7, 3)"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 4, 3, 3}), Tensor::zeros({4})); },
               {"bias", "(4,)"});
  expect_error([&] { conv2d(Tensor::zeros({4, 5, 5}), Tensor::zeros({3, 4, 3, 3})); },
               {"(N, C_in, H, W)", "(4, 5, 5)"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 4, 3, 3}, DType::F64)); }, {"dtype"});
  expect_error([&] { conv2d(x, Tensor::zeros({3, 4, 3, 3}), Tensor(), {.stride = {0, 1}}); },
               {"stride"});
}

// ---- pools ----

TEST(Pool2d, MaxValuesAndTies) {
  // One plane 4×4; 2×2 windows, stride 2.
  Tensor x = Tensor::from_vector<double>({1, 2, 5, 0,  //
                                          3, 4, 5, 1,  //
                                          -1, -2, 7, 8,  //
                                          -3, -9, 9, 6},
                                         {1, 1, 4, 4})
                 .set_requires_grad();
  Tensor y = max_pool2d(x, {});
  EXPECT_EQ(y.to_double_vector(), (std::vector<double>{4, 5, -1, 9}));
  y.backward(Tensor::from_vector<double>({10, 20, 30, 40}, {1, 1, 2, 2}));
  // A tie (the two 5s) sends the gradient to the first maximum, as PyTorch does.
  EXPECT_EQ(x.grad().to_double_vector(),
            (std::vector<double>{0, 0, 20, 0, 0, 10, 0, 0, 30, 0, 0, 0, 0, 0, 40, 0}));
  // Padding is never the maximum, even for all-negative windows.
  Tensor z = max_pool2d(mul_scalar(Tensor::ones({1, 1, 2, 2}, DType::F64), -5.0),
                        {{2, 2}, {1, 1}, {1, 1}});
  EXPECT_EQ(z.to_double_vector(), std::vector<double>(9, -5.0));
}

TEST(Pool2d, MaxSavesCompactIndices) {
  const int64_t before = autograd::saved_bytes();
  Tensor x = testing::randn({2, 3, 8, 8}, 5, DType::F32).set_requires_grad();
  Tensor y = max_pool2d(x, {});
  EXPECT_EQ(autograd::saved_bytes() - before, 2 * 3 * 4 * 4);  // one u8 per output
  y.backward(Tensor::ones(y.shape()));
  // A window over 256 cells keeps i32 plane indices.
  Tensor x2 = testing::randn({1, 1, 17, 17}, 6).set_requires_grad();
  Tensor y2 = max_pool2d(x2, {{17, 17}, {1, 1}, {0, 0}});
  EXPECT_EQ(autograd::saved_bytes() - before, 4);
  y2.backward(Tensor::ones(y2.shape()));
  EXPECT_EQ(sum(x2.grad()).item<double>(), 1.0);
  EXPECT_EQ(max(max(x2.detach(), 3), 2).item<double>(), y2.item<double>());
}

TEST(Pool2d, GradcheckMax) {
  const std::vector<Pool2dArgs> cases = {
      {{2, 2}, {2, 2}, {0, 0}}, {{3, 3}, {2, 2}, {1, 1}}, {{3, 2}, {1, 2}, {1, 0}},
      {{2, 3}, {3, 1}, {1, 1}}, {{17, 17}, {1, 1}, {0, 0}}};
  uint64_t seed = 70;
  for (const auto& a : cases) {
    const Shape s = a.kernel[0] == 17 ? Shape{1, 2, 17, 18} : Shape{2, 2, 7, 6};
    EXPECT_TRUE(testing::gradcheck([a](auto& v) { return max_pool2d(v[0], a); },
                                   {testing::randn(s, ++seed)}))
        << a.kernel[0] << "x" << a.kernel[1];
  }
}

// Average pool against the definition (count_include_pad: divide by the kernel area).
TEST(Pool2d, AvgValuesAndGradcheck) {
  const Tensor x = testing::randn({2, 3, 7, 6}, 80);
  const Pool2dArgs a{{3, 2}, {2, 1}, {1, 1}};
  const Tensor y = avg_pool2d(x, a);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4, 7}));
  const auto xv = x.to_double_vector(), yv = y.to_double_vector();
  for (int64_t pl = 0; pl < 6; ++pl)
    for (int64_t oh = 0; oh < 4; ++oh)
      for (int64_t ow = 0; ow < 7; ++ow) {
        double s = 0;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t ih = oh * 2 - 1 + i, iw = ow - 1 + j;
            if (ih >= 0 && ih < 7 && iw >= 0 && iw < 6) s += xv[(pl * 7 + ih) * 6 + iw];
          }
        EXPECT_NEAR(yv[(pl * 4 + oh) * 7 + ow], s / 6, 1e-14);
      }
  const std::vector<Pool2dArgs> cases = {a, {{2, 2}, {2, 2}, {0, 0}}, {{3, 3}, {1, 1}, {1, 1}}};
  for (const auto& c : cases)
    EXPECT_TRUE(testing::gradcheck([c](auto& v) { return avg_pool2d(v[0], c); }, {x}));
  const int64_t before = autograd::saved_bytes();
  Tensor xl = x.detach().set_requires_grad();
  Tensor yl = avg_pool2d(xl, a);
  EXPECT_EQ(autograd::saved_bytes(), before);
}

TEST(Pool2d, AdaptiveAvg) {
  // 5 -> 3: windows [0,2), [1,4), [3,5) (PyTorch's floor/ceil formula; they overlap).
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5}, {1, 1, 1, 5});
  EXPECT_EQ(adaptive_avg_pool2d(x, 1, 3).to_double_vector(), (std::vector<double>{1.5, 3, 4.5}));
  // Global pooling is the mean.
  const Tensor z = testing::randn({2, 3, 4, 5}, 90);
  EXPECT_TRUE(testing::all_close(adaptive_avg_pool2d(z, 1, 1), mean(z, {2, 3}, true), 1e-14, 1e-14));
  // Output larger than the input, and uneven windows.
  for (const auto& size : std::vector<std::pair<int64_t, int64_t>>{{3, 4}, {6, 7}, {2, 2}, {1, 5}}) {
    const int64_t oh = size.first, ow = size.second;  // plain variables: clang 14 cannot capture bindings
    EXPECT_TRUE(testing::gradcheck(
        [oh, ow](auto& v) { return adaptive_avg_pool2d(v[0], oh, ow); }, {z}))
        << oh << "x" << ow;
  }
}

TEST(Pool2d, Errors) {
  const Tensor x = Tensor::zeros({1, 2, 4, 4});
  expect_error([&] { max_pool2d(x, {{3, 3}, {1, 1}, {2, 2}}); }, {"padding", "half"});
  expect_error([&] { avg_pool2d(x, {{5, 5}, {1, 1}, {0, 0}}); },
               {"larger than the padded input", "(1, 2, 4, 4)"});
  expect_error([&] { max_pool2d(x, {{2, 2}, {0, 2}, {0, 0}}); }, {"stride"});
  expect_error([&] { max_pool2d(Tensor::zeros({2, 4, 4}), {}); }, {"(N, C, H, W)", "(2, 4, 4)"});
  expect_error([&] { adaptive_avg_pool2d(x, 0, 2); }, {"output size", "(0, 2)"});
}

}  // namespace
}  // namespace lb
