// concat, split and index_select: values against explicit index arithmetic, every dtype
// path, views, f64 gradchecks, what backward saves, and errors naming the offending input.
#include <gtest/gtest.h>

#include <numeric>

#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// Element of a contiguous row-major value vector at a multi-index.
double at(const std::vector<double>& v, const Shape& s, const std::vector<int64_t>& i) {
  int64_t off = 0;
  for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + i[d];
  return v[off];
}

// ---------------------------------------------------------------- concat

TEST(Concat, ValuesAlongEveryDim) {
  const Tensor a = testing::randn({2, 3, 4}, 1), b = testing::randn({2, 3, 4}, 2);
  for (int64_t dim : {0, 1, 2, -1}) {
    SCOPED_TRACE(dim);
    const int64_t d = dim < 0 ? dim + 3 : dim;
    // Second input: size 1 along dim (a slice of b) to make sizes differ.
    const Tensor b1 = b.slice(d, 0, 1);
    const Tensor y = concat({a, b1, a}, dim);
    Shape want = a.shape();
    want[d] = a.shape()[d] * 2 + 1;
    ASSERT_EQ(y.shape(), want);
    const auto yv = y.to_double_vector(), av = a.to_double_vector(), bv = b.to_double_vector();
    for (int64_t i = 0; i < want[0]; ++i)
      for (int64_t j = 0; j < want[1]; ++j)
        for (int64_t k = 0; k < want[2]; ++k) {
          std::vector<int64_t> idx = {i, j, k};
          const int64_t n = a.shape()[d];
          double expect;
          if (idx[d] < n) {
            expect = at(av, a.shape(), idx);
          } else if (idx[d] == n) {
            idx[d] = 0;
            expect = at(bv, b.shape(), idx);
          } else {
            idx[d] -= n + 1;
            expect = at(av, a.shape(), idx);
          }
          ASSERT_EQ(at(yv, want, {i, j, k}), expect) << i << "," << j << "," << k;
        }
  }
}

TEST(Concat, NonContiguousEmptyAndIntegerInputs) {
  const Tensor base = Tensor::from_vector<double>({0, 1, 2, 3, 4, 5}, {2, 3});
  const Tensor tr = base.transpose(0, 1);  // (3, 2): [[0,3],[1,4],[2,5]]
  const Tensor ones = Tensor::ones({3, 1}, DType::F64);
  const Tensor empty = Tensor::zeros({3, 0}, DType::F64);
  EXPECT_EQ(concat({tr, empty, ones}, 1).to_double_vector(),
            (std::vector<double>{0, 3, 1, 1, 4, 1, 2, 5, 1}));
  EXPECT_EQ(concat({empty, empty}, 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(concat({tr}, 0).to_double_vector(), tr.to_double_vector());
  const Tensor i = Tensor::from_vector<int64_t>({7, -8}, {2});
  const Tensor j = Tensor::from_vector<int64_t>({int64_t{1} << 50}, {1});
  const Tensor ij = concat({i, j}, 0);
  EXPECT_EQ(ij.dtype(), DType::I64);
  EXPECT_EQ(ij.data<int64_t>()[2], int64_t{1} << 50);
  const Tensor m = concat({Tensor::from_vector<bool>({true}, {1, 1}),
                           Tensor::from_vector<bool>({false, true}, {1, 2})}, 1);
  EXPECT_EQ(m.to_double_vector(), (std::vector<double>{1, 0, 1}));
}

TEST(Concat, LargeMatchesSlices) {
  // Big enough for the OpenMP path; each slice of the output must equal its input.
  const Tensor a = testing::randn({64, 300}, 3, DType::F32), b = testing::randn({64, 500}, 4, DType::F32);
  const Tensor y = concat({a, b}, 1);
  EXPECT_EQ(y.slice(1, 0, 300).to_double_vector(), a.to_double_vector());
  EXPECT_EQ(y.slice(1, 300, 800).to_double_vector(), b.to_double_vector());
}

TEST(Concat, Gradcheck) {
  const Tensor a = testing::randn({2, 3, 2}, 5), b = testing::randn({2, 1, 2}, 6);
  const Tensor c = testing::randn({2, 2, 2}, 7);
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return concat({v[0], v[1], v[2]}, 1); }, {a, b, c}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return concat({v[0], v[0].transpose(0, 2)}, 0); },
                                 {testing::randn({2, 2, 2}, 8)}));
  EXPECT_TRUE(testing::gradcheck([](auto& v) { return concat({v[1], v[0]}, -1); },
                                 {testing::randn({3, 1}, 9), testing::randn({3, 4}, 10)}));
}

TEST(Concat, OnlyInputsRequiringGradGetOne) {
  Tensor a = testing::randn({2, 2}, 11);
  a.set_requires_grad();
  const Tensor b = testing::randn({2, 3}, 12);
  const int64_t before = autograd::saved_bytes();
  Tensor y = concat({b, a}, 1);
  EXPECT_EQ(autograd::saved_bytes(), before);  // concat saves nothing
  const Tensor r = testing::randn({2, 5}, 13);
  sum(mul(y, r)).backward();
  EXPECT_EQ(a.grad().to_double_vector(), r.slice(1, 3, 5).to_double_vector());
  EXPECT_FALSE(b.grad().defined());
}

TEST(Concat, ErrorsNameTheOffendingInput) {
  const Tensor a = Tensor::zeros({2, 3});
  EXPECT_NE(error_of([] { concat({}, 0); }).find("at least one"), std::string::npos);
  std::string e = error_of([&] { concat({a, a, Tensor::zeros({2, 3}, DType::F64)}, 0); });
  EXPECT_NE(e.find("input 2"), std::string::npos) << e;
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
  e = error_of([&] { concat({a, Tensor::zeros({4, 3})}, 1); });
  EXPECT_NE(e.find("input 1"), std::string::npos) << e;
  EXPECT_NE(e.find("(4, 3)"), std::string::npos) << e;
  EXPECT_NE(e.find("(2, 3)"), std::string::npos) << e;
  e = error_of([&] { concat({a, Tensor::zeros({2, 3, 1})}, 0); });
  EXPECT_NE(e.find("input 1"), std::string::npos) << e;
  e = error_of([&] { concat({a, Tensor()}, 0); });
  EXPECT_NE(e.find("input 1"), std::string::npos) << e;
  EXPECT_NE(error_of([] { concat({Tensor::scalar(1.0)}, 0); }).find("0-d"), std::string::npos);
  EXPECT_THROW(concat({a}, 2), Error);
  EXPECT_THROW(concat({a}, -3), Error);
}

// ---------------------------------------------------------------- split

TEST(Split, PiecesAreViews) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {3, 4});
  const auto p = split(x, {1, 0, 3}, 1);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].shape(), (Shape{3, 1}));
  EXPECT_EQ(p[1].shape(), (Shape{3, 0}));
  EXPECT_EQ(p[2].shape(), (Shape{3, 3}));
  EXPECT_EQ(p[0].to_double_vector(), (std::vector<double>{0, 4, 8}));
  EXPECT_EQ(p[2].to_double_vector(), (std::vector<double>{1, 2, 3, 5, 6, 7, 9, 10, 11}));
  for (const auto& t : p) EXPECT_EQ(t.storage().get(), x.storage().get());
  x.data<float>()[5] = 50;  // row 1, col 1 -> piece 2 (1, 0)
  EXPECT_EQ(p[2].to_double_vector()[3], 50);
  const auto q = split(x, {2, 1}, 0);
  EXPECT_EQ(q[1].to_double_vector(), (std::vector<double>{8, 9, 10, 11}));
  // concat undoes split.
  EXPECT_EQ(concat(split(x, {3, 1}, -1), -1).to_double_vector(), x.to_double_vector());
}

TEST(Split, Gradcheck) {
  const Fn f = [](auto& v) {
    const auto p = split(v[0], {2, 1, 2}, 1);  // p[1] unused: its gradient is zero
    return concat({mul(p[0], p[0]), mul_scalar(p[2], 3.0)}, 1);
  };
  EXPECT_TRUE(testing::gradcheck(f, {testing::randn({3, 5, 2}, 21)}));
}

TEST(Split, Errors) {
  const Tensor x = Tensor::zeros({2, 5});
  std::string e = error_of([&] { split(x, {2, 2}, 1); });
  EXPECT_NE(e.find("[2, 2]"), std::string::npos) << e;
  EXPECT_NE(e.find("(2, 5)"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { split(x, {6, -1}, 1); }).find("negative"), std::string::npos);
  EXPECT_THROW(split(Tensor::scalar(1.0), {1}, 0), Error);
  EXPECT_THROW(split(x, {2}, 2), Error);
}

// ---------------------------------------------------------------- index_select

TEST(IndexSelect, ValuesAlongEveryDimAndIndexType) {
  const Tensor x = testing::randn({3, 4, 5}, 31);
  const auto xv = x.to_double_vector();
  const std::vector<int64_t> ids = {2, 0, 2, 1};
  for (int64_t dim : {0, 1, 2, -1})
    for (DType it : {DType::I64, DType::I32}) {
      SCOPED_TRACE(std::to_string(dim) + dtype_name(it));
      const int64_t d = dim < 0 ? dim + 3 : dim;
      const Tensor index = Tensor::from_vector<int64_t>(ids, {4}).to(it);
      const Tensor y = index_select(x, dim, index);
      Shape want = x.shape();
      want[d] = 4;
      ASSERT_EQ(y.shape(), want);
      const auto yv = y.to_double_vector();
      for (int64_t i = 0; i < want[0]; ++i)
        for (int64_t j = 0; j < want[1]; ++j)
          for (int64_t k = 0; k < want[2]; ++k) {
            std::vector<int64_t> src = {i, j, k};
            src[d] = ids[src[d]];
            ASSERT_EQ(at(yv, want, {i, j, k}), at(xv, x.shape(), src));
          }
    }
}

TEST(IndexSelect, EdgeCases) {
  const Tensor x = Tensor::from_vector<int32_t>({10, 11, 12, 13, 14, 15}, {3, 2});
  // Integer x, 0-d index, empty index, non-contiguous x and index.
  EXPECT_EQ(index_select(x, 0, Tensor::scalar(2, DType::I64)).to_double_vector(),
            (std::vector<double>{14, 15}));
  EXPECT_EQ(index_select(x, 0, Tensor::zeros({0}, DType::I64)).shape(), (Shape{0, 2}));
  EXPECT_EQ(index_select(x.transpose(0, 1), 1, Tensor::from_vector<int64_t>({2, 0}, {2})).to_double_vector(),
            (std::vector<double>{14, 10, 15, 11}));
  const Tensor strided_idx = Tensor::from_vector<int64_t>({1, 9, 0, 9}, {4}).slice(0, 0, 4, 2);
  EXPECT_EQ(index_select(x, 0, strided_idx).to_double_vector(), (std::vector<double>{12, 13, 10, 11}));
}

TEST(IndexSelect, Gradcheck) {
  // Repeated indices: the backward must accumulate, not overwrite.
  const Tensor i0 = Tensor::from_vector<int64_t>({3, 0, 3, 3, 1}, {5});
  const Tensor i1 = Tensor::from_vector<int32_t>({1, 1, 0}, {3});
  EXPECT_TRUE(testing::gradcheck([&](auto& v) { return index_select(v[0], 0, i0); },
                                 {testing::randn({4, 3}, 41)}));
  EXPECT_TRUE(testing::gradcheck([&](auto& v) { return index_select(v[0], 1, i1); },
                                 {testing::randn({2, 3, 2}, 42)}));
  EXPECT_TRUE(testing::gradcheck([&](auto& v) { return index_select(v[0].transpose(0, 1), -1, i1); },
                                 {testing::randn({2, 3}, 43)}));
}

TEST(IndexSelect, BackwardScatterAddLargeAndSavesOnlyIndex) {
  // (1000, 96) rows gathered 3000 times with repeats: big enough for the threaded paths.
  Tensor x = testing::randn({1000, 96}, 51, DType::F32);
  x.set_requires_grad();
  std::vector<int64_t> ids(3000);
  for (size_t j = 0; j < ids.size(); ++j) ids[j] = static_cast<int64_t>((j * 7919) % 997);
  const Tensor index = Tensor::from_vector<int64_t>(ids, {3000});
  const int64_t before = autograd::saved_bytes();
  Tensor y = index_select(x, 0, index);
  EXPECT_EQ(autograd::saved_bytes() - before, static_cast<int64_t>(index.nbytes()));
  const Tensor r = testing::randn({3000, 96}, 52, DType::F32);
  sum(mul(y, r)).backward();
  std::vector<double> expect(1000 * 96, 0.0);
  const auto rv = r.to_double_vector();
  for (size_t j = 0; j < ids.size(); ++j)
    for (int64_t c = 0; c < 96; ++c) expect[ids[j] * 96 + c] += rv[j * 96 + c];
  EXPECT_TRUE(testing::all_close(x.grad(), Tensor::from_vector<double>(expect, {1000, 96}), 1e-5, 1e-5));
  // Same along the last axis (outer = 1000 rows, inner = 1).
  Tensor x2 = testing::randn({1000, 40}, 53, DType::F64);
  x2.set_requires_grad();
  const Tensor idx2 = Tensor::from_vector<int32_t>({39, 0, 39, 5, 5, 5}, {6});
  Tensor y2 = index_select(x2, 1, idx2);
  const Tensor r2 = testing::randn({1000, 6}, 54);
  sum(mul(y2, r2)).backward();
  const auto g2 = x2.grad().to_double_vector();
  const auto r2v = r2.to_double_vector();
  for (int64_t row : {0, 517, 999}) {
    EXPECT_DOUBLE_EQ(g2[row * 40 + 39], r2v[row * 6 + 0] + r2v[row * 6 + 2]);
    EXPECT_DOUBLE_EQ(g2[row * 40 + 5], r2v[row * 6 + 3] + r2v[row * 6 + 4] + r2v[row * 6 + 5]);
    EXPECT_DOUBLE_EQ(g2[row * 40 + 0], r2v[row * 6 + 1]);
    EXPECT_DOUBLE_EQ(g2[row * 40 + 1], 0.0);
  }
}

TEST(IndexSelect, Errors) {
  const Tensor x = Tensor::zeros({4, 3});
  std::string e = error_of([&] { index_select(x, 0, Tensor::from_vector<int64_t>({1, 4}, {2})); });
  EXPECT_NE(e.find("index[1] = 4"), std::string::npos) << e;
  EXPECT_NE(e.find("(4, 3)"), std::string::npos) << e;
  e = error_of([&] { index_select(x, 1, Tensor::from_vector<int32_t>({-1}, {1})); });
  EXPECT_NE(e.find("index[0] = -1"), std::string::npos) << e;
  e = error_of([&] { index_select(x, 0, Tensor::zeros({2})); });
  EXPECT_NE(e.find("i32 or i64"), std::string::npos) << e;
  e = error_of([&] { index_select(x, 0, Tensor::zeros({2, 1}, DType::I64)); });
  EXPECT_NE(e.find("1-D"), std::string::npos) << e;
  EXPECT_THROW(index_select(x, 2, Tensor::zeros({1}, DType::I64)), Error);
  EXPECT_THROW(index_select(Tensor::scalar(1.0), 0, Tensor::zeros({1}, DType::I64)), Error);
  EXPECT_THROW(index_select(x, 0, Tensor()), Error);
}

}  // namespace
}  // namespace lb
