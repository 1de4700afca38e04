// Winograd F(2×2, 3×3) convolution (src/cpu/winograd_conv.h): output and all gradients
// against conv2d's im2col path (itself checked against direct loops in conv_pool_test) across
// batch, channels, image sizes, paddings and bias; f64 finite-difference gradchecks through
// conv2d; the raw entry points with only dx or only dw wanted; the dispatch rule.
#include "src/cpu/winograd_conv.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using detail::ConvAlgo;

// Forces conv2d's algorithm for the scope, restoring the previous choice.
class AlgoScope {
 public:
  explicit AlgoScope(ConvAlgo a) : prev_(detail::conv_algo()) { detail::set_conv_algo(a); }
  ~AlgoScope() { detail::set_conv_algo(prev_); }

 private:
  ConvAlgo prev_;
};

// Forces Winograd's transform layout for the scope.
class LayoutScope {
 public:
  explicit LayoutScope(detail::WinogradLayout l) : prev_(detail::winograd_layout()) {
    detail::set_winograd_layout(l);
  }
  ~LayoutScope() { detail::set_winograd_layout(prev_); }

 private:
  detail::WinogradLayout prev_;
};

struct Result {
  Tensor y, dx, dw, db;
};

Result run_conv(ConvAlgo algo, const Tensor& x0, const Tensor& w0, const Tensor& b0,
                const Conv2dArgs& a, const Tensor& g) {
  AlgoScope scope(algo);
  const Tensor x = x0.clone().set_requires_grad();
  const Tensor w = w0.clone().set_requires_grad();
  const Tensor b = b0.defined() ? b0.clone().set_requires_grad() : Tensor();
  const Tensor y = conv2d(x, w, b, a);
  y.backward(g);
  return {y.detach(), x.grad(), w.grad(), b.defined() ? b.grad() : Tensor()};
}

struct Case {
  Shape x;
  int64_t Co;
  int64_t ph, pw;
  bool bias;
};

std::string case_str(const Case& c) {
  return "x " + shape_str(c.x) + " Co " + std::to_string(c.Co) + " pad (" +
         std::to_string(c.ph) + ", " + std::to_string(c.pw) + ")" + (c.bias ? " bias" : "");
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  // Every image size of interest with padding 1, small channel counts.
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 8, 13, 32};
  int k = 0;
  for (int64_t h : sizes)
    for (int64_t w : sizes) {
      if ((h == 32) != (w == 32) && (h + w) % 3 != 0) continue;  // a few non-square 32s
      const int64_t n = 1 + k % 3, c = 1 + (k * 7) % 5, co = 1 + (k * 5) % 6;
      cs.push_back({{n, c, h, w}, co, 1, 1, k % 2 == 0});
      ++k;
    }
  // Channels around and past the 16-lane width, batches up to 5.
  cs.push_back({{5, 17, 7, 9}, 33, 1, 1, true});
  cs.push_back({{2, 70, 8, 8}, 16, 1, 1, false});
  cs.push_back({{3, 16, 4, 4}, 70, 1, 1, true});
  cs.push_back({{4, 31, 13, 5}, 47, 1, 1, true});
  cs.push_back({{1, 64, 32, 32}, 64, 1, 1, false});
  // Other paddings, symmetric and not (output sizes odd and even).
  for (int64_t ph : {0, 1, 2})
    for (int64_t pw : {0, 1, 2}) {
      cs.push_back({{2, 3, 5, 6}, 4, ph, pw, (ph + pw) % 2 == 0});
      cs.push_back({{1, 5, 3, 8}, 2, ph, pw, true});
    }
  cs.push_back({{2, 2, 1, 1}, 3, 2, 2, true});
  cs.push_back({{1, 2, 3, 3}, 3, 0, 0, true});  // a single 1×1 output
  // Enough work for threads: chunks of whole images, and chunks splitting one image (large
  // rows, f64) where dx tiles of neighbouring chunks overlap.
  cs.push_back({{9, 24, 8, 8}, 24, 1, 1, true});
  cs.push_back({{2, 40, 66, 66}, 40, 1, 1, true});
  return cs;
}

double rms(const Tensor& t) {
  double ss = 0;
  const auto v = t.to_double_vector();
  for (double e : v) ss += e * e;
  return std::sqrt(ss / std::max<size_t>(1, v.size()));
}

// f64: Winograd equals im2col to 1e-12 (the same sums in another order). f32: both are
// compared with the f64 result; Winograd's error must stay near im2col's (F(2,3)'s transforms
// add a few roundings per product: the ±½ and sums of up to 4 terms, plus a few f32 epsilons)
// and below 1e-5 relative
// (norm-wise; elementwise with an absolute tolerance scaled to the tensor's rms, since sums of
// thousands of products cancel to near zero in places).
void expect_matches(const Case& c, uint64_t seed) {
  const Tensor x = testing::randn(c.x, seed);
  const Tensor w = testing::randn({c.Co, c.x[1], 3, 3}, seed + 1);
  const Tensor b = c.bias ? testing::randn({c.Co}, seed + 2) : Tensor();
  const Conv2dArgs a{{1, 1}, {c.ph, c.pw}, {1, 1}, 1};
  ASSERT_TRUE(detail::winograd_applies(x.shape(), w.shape(), a)) << case_str(c);
  const Shape ys{c.x[0], c.Co, c.x[2] + 2 * c.ph - 2, c.x[3] + 2 * c.pw - 2};
  const Tensor g = testing::randn(ys, seed + 3);
  const Result ref = run_conv(ConvAlgo::Im2col, x, w, b, a, g);
  const Result win = run_conv(ConvAlgo::Winograd, x, w, b, a, g);
  const std::pair<const char*, std::pair<Tensor, Tensor>> f64_pairs[] = {
      {"y", {win.y, ref.y}}, {"dx", {win.dx, ref.dx}}, {"dw", {win.dw, ref.dw}},
      {"db", {win.db, ref.db}}};
  for (const auto& [name, pr] : f64_pairs)
    if (pr.first.defined())
      EXPECT_TRUE(testing::all_close(pr.first, pr.second, 1e-12, 1e-12 * rms(pr.second)))
          << name << " f64, " << case_str(c);

  auto f32 = [](const Tensor& t) { return t.defined() ? t.to(DType::F32) : Tensor(); };
  const Result ref32 = run_conv(ConvAlgo::Im2col, f32(x), f32(w), f32(b), a, f32(g));
  const Result win32 = run_conv(ConvAlgo::Winograd, f32(x), f32(w), f32(b), a, f32(g));
  const std::tuple<const char*, Tensor, Tensor, Tensor> f32_sets[] = {
      {"y", win32.y, ref32.y, ref.y},
      {"dx", win32.dx, ref32.dx, ref.dx},
      {"dw", win32.dw, ref32.dw, ref.dw},
      {"db", win32.db, ref32.db, ref.db}};
  for (const auto& [name, w32, i32, truth] : f32_sets) {
    if (!truth.defined()) continue;
    const Tensor w64 = w32.to(DType::F64), i64 = i32.to(DType::F64);
    const double ew = testing::rel_error(w64, truth), ei = testing::rel_error(i64, truth);
    EXPECT_LT(ew, 1e-5) << name << " f32, " << case_str(c);
    // + 8 f32 epsilons: on tiny cases im2col's own error can be far below one rounding per
    // term (x (1, 2, 3, 2), Co 1: 3.1e-8 on an Intel Xeon, where Winograd's was 2.4e-7).
    EXPECT_LT(ew, 4 * ei + 8 * 5.96e-8) << name << " f32 (im2col " << ei << "), " << case_str(c);
    EXPECT_TRUE(testing::all_close(w64, truth, 1e-4, 1e-5 * rms(truth)))
        << name << " f32, " << case_str(c);
  }
}

// Both transform layouts on every case (Auto picks one by image width).
TEST(WinogradConv, MatchesIm2col) {
  for (auto layout : {detail::WinogradLayout::Rows, detail::WinogradLayout::Channels}) {
    LayoutScope scope(layout);
    uint64_t seed = 1000;
    for (const Case& c : cases()) expect_matches(c, seed += 10);
  }
}

// One thread: chunks run in order (no rounds), still splitting the large images.
TEST(WinogradConv, MatchesIm2colSingleThread) {
  const int prev = omp_get_max_threads();
  omp_set_num_threads(1);
  for (auto layout : {detail::WinogradLayout::Rows, detail::WinogradLayout::Channels}) {
    LayoutScope scope(layout);
    uint64_t seed = 5000;
    for (const Case& c : {Case{{9, 24, 8, 8}, 24, 1, 1, true}, Case{{2, 40, 66, 66}, 40, 1, 1, true},
                          Case{{3, 17, 13, 7}, 18, 2, 0, false}})
      expect_matches(c, seed += 10);
  }
  omp_set_num_threads(prev);
}

TEST(WinogradConv, Gradcheck) {
  AlgoScope scope(ConvAlgo::Winograd);
  const struct {
    Shape x;
    int64_t Co, ph, pw;
  } gc[] = {{{2, 3, 5, 5}, 4, 1, 1}, {{1, 2, 4, 7}, 3, 0, 2}, {{2, 2, 2, 3}, 2, 2, 1}};
  for (auto layout : {detail::WinogradLayout::Rows, detail::WinogradLayout::Channels}) {
    LayoutScope ls(layout);
    uint64_t seed = 3000;
    for (const auto& c : gc) {
      const Tensor x = testing::randn(c.x, ++seed);
      const Tensor w = testing::randn({c.Co, c.x[1], 3, 3}, ++seed);
      const Tensor b = testing::randn({c.Co}, ++seed);
      const Conv2dArgs a{{1, 1}, {c.ph, c.pw}, {1, 1}, 1};
      ASSERT_TRUE(detail::use_winograd(x.shape(), w.shape(), a));
      EXPECT_TRUE(testing::gradcheck([a](auto& v) { return conv2d(v[0], v[1], v[2], a); },
                                     {x, w, b}))
          << shape_str(c.x);
    }
  }
}

// The raw entry points with only one gradient wanted (the other pointer and its operand
// null), and a non-contiguous x through conv2d.
TEST(WinogradConv, PartialGradientsAndViews) {
  const Shape xs{3, 18, 9, 6}, ws{20, 18, 3, 3};
  const Conv2dArgs a{{1, 1}, {1, 1}, {1, 1}, 1};
  const Tensor x = testing::randn(xs, 41), w = testing::randn(ws, 42);
  const Tensor g = testing::randn({3, 20, 9, 6}, 43);
  const Result ref = run_conv(ConvAlgo::Im2col, x, w, Tensor(), a, g);
  const detail::WinogradShape s = detail::winograd_shape(xs, ws, a);
  Tensor dx = Tensor::full(xs, 7.0, DType::F64), dw = Tensor::full(ws, 7.0, DType::F64);  // overwritten, not added to
  detail::winograd_conv_backward<double>(s, g.data<double>(), nullptr, w.data<double>(),
                                         dx.data<double>(), nullptr);
  detail::winograd_conv_backward<double>(s, g.data<double>(), x.data<double>(), nullptr, nullptr,
                                         dw.data<double>());
  EXPECT_TRUE(testing::all_close(dx, ref.dx, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(dw, ref.dw, 1e-12, 1e-12));

  const Tensor xv = testing::randn({6, 9, 3, 18}, 44).permute({2, 3, 1, 0});  // (3, 18, 9, 6)
  ASSERT_FALSE(xv.is_contiguous());
  const Result rv = run_conv(ConvAlgo::Winograd, xv, w, Tensor(), a, g);
  const Result rc = run_conv(ConvAlgo::Im2col, xv.contiguous(), w, Tensor(), a, g);
  EXPECT_TRUE(testing::all_close(rv.y, rc.y, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(rv.dx, rc.dx, 1e-12, 1e-12));
  EXPECT_TRUE(testing::all_close(rv.dw, rc.dw, 1e-12, 1e-12));

  // Through conv2d with one operand frozen (only the other is saved), on both layouts.
  for (auto layout : {detail::WinogradLayout::Rows, detail::WinogradLayout::Channels}) {
    LayoutScope ls(layout);
    AlgoScope as(ConvAlgo::Winograd);
    const Tensor wl = w.clone().set_requires_grad();
    conv2d(x, wl, Tensor(), a).backward(g);
    EXPECT_TRUE(testing::all_close(wl.grad(), ref.dw, 1e-12, 1e-12));
    const Tensor xl = x.clone().set_requires_grad();
    conv2d(xl, w, Tensor(), a).backward(g);
    EXPECT_TRUE(testing::all_close(xl.grad(), ref.dx, 1e-12, 1e-12));
  }
}

TEST(WinogradConv, DispatchRule) {
  const Conv2dArgs same{{1, 1}, {1, 1}, {1, 1}, 1};
  AlgoScope scope(ConvAlgo::Auto);
  // ResNet's 3×3 stride-1 convolutions take Winograd, down to the 4×4 stage.
  EXPECT_TRUE(detail::use_winograd({64, 64, 32, 32}, {64, 64, 3, 3}, same));
  EXPECT_TRUE(detail::use_winograd({64, 512, 4, 4}, {512, 512, 3, 3}, same));
  EXPECT_TRUE(detail::use_winograd({1, 32, 5, 5}, {16, 32, 3, 3}, {{1, 1}, {2, 0}, {1, 1}, 1}));
  EXPECT_TRUE(detail::use_winograd({64, 64, 32, 32}, {8, 64, 3, 3}, same));
  EXPECT_TRUE(detail::use_winograd({2, 256, 2, 2}, {256, 256, 3, 3}, same));
  EXPECT_TRUE(detail::use_winograd({2, 256, 3, 3}, {256, 256, 3, 3}, same));
  EXPECT_TRUE(detail::use_winograd({2, 256, 5, 5}, {256, 256, 3, 3}, same));
  // The 3-channel stem and narrow layers stay im2col.
  EXPECT_FALSE(detail::use_winograd({64, 3, 32, 32}, {64, 3, 3, 3}, same));
  EXPECT_FALSE(detail::use_winograd({64, 16, 32, 32}, {64, 16, 3, 3}, same));
  EXPECT_FALSE(detail::use_winograd({64, 32, 32, 32}, {8, 32, 3, 3}, same));
  EXPECT_FALSE(detail::use_winograd({64, 64, 32, 32}, {4, 64, 3, 3}, same));
  EXPECT_FALSE(detail::use_winograd({64, 8, 32, 32}, {64, 8, 3, 3}, same));
  // Tiles mostly past the edge: a 1×1 output (4 tile outputs for 1).
  EXPECT_FALSE(detail::use_winograd({2, 256, 1, 1}, {256, 256, 3, 3}, same));
  // Not Winograd-able at all: stride, dilation, groups, kernel size, empty output.
  const Shape xs{8, 64, 16, 16}, ws{64, 64, 3, 3};
  const Conv2dArgs stride2{{2, 2}, {1, 1}, {1, 1}, 1}, dil2{{1, 1}, {2, 2}, {2, 2}, 1};
  const Conv2dArgs groups2{{1, 1}, {1, 1}, {1, 1}, 2};
  for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Winograd}) {
    detail::set_conv_algo(algo);
    EXPECT_FALSE(detail::use_winograd(xs, ws, stride2));
    EXPECT_FALSE(detail::use_winograd(xs, ws, dil2));
    EXPECT_FALSE(detail::use_winograd(xs, {64, 32, 3, 3}, groups2));
    EXPECT_FALSE(detail::use_winograd(xs, {64, 64, 5, 5}, {{1, 1}, {2, 2}, {1, 1}, 1}));
    EXPECT_FALSE(detail::use_winograd(xs, {64, 64, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}));
    EXPECT_FALSE(detail::use_winograd({1, 64, 1, 1}, ws, {{1, 1}, {0, 0}, {1, 1}, 1}));
  }
  // Forcing: Winograd takes even the stem; im2col takes everything.
  detail::set_conv_algo(ConvAlgo::Winograd);
  EXPECT_TRUE(detail::use_winograd({64, 3, 32, 32}, {64, 3, 3, 3}, same));
  detail::set_conv_algo(ConvAlgo::Im2col);
  EXPECT_FALSE(detail::use_winograd({64, 64, 32, 32}, {64, 64, 3, 3}, same));

  // conv2d really follows the rule: in f32 the two algorithms round differently.
  const Tensor x = testing::randn({2, 32, 8, 8}, 51, DType::F32);
  const Tensor w = testing::randn({32, 32, 3, 3}, 52, DType::F32);
  const Tensor g = testing::randn({2, 32, 8, 8}, 53, DType::F32);
  const Result auto_r = run_conv(ConvAlgo::Auto, x, w, Tensor(), same, g);
  const Result win = run_conv(ConvAlgo::Winograd, x, w, Tensor(), same, g);
  const Result im = run_conv(ConvAlgo::Im2col, x, w, Tensor(), same, g);
  EXPECT_TRUE(testing::all_close(auto_r.y, win.y, 0, 0));
  EXPECT_FALSE(testing::all_close(auto_r.y, im.y, 0, 0));
}

}  // namespace
}  // namespace lb
