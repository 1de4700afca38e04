// Row-sparse embedding gradients (lb/autograd/row_sparse_grad.h), the form an optimizer step
// fused into backward takes them in: the rows an embedding's backward offers equal its dense
// gradient bit for bit (i32 and i64 indices, with and without padding_idx, f32 and f64); a sink
// that declines, or none, gets the dense gradient; sums of row-sparse gradients equal the dense
// sums; and Adam / AdamW stepped with rows give the dense step's weights and state bit for bit,
// with f32 moments and with 8- and 4-bit coded ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "lb/autograd/row_sparse_grad.h"
#include "lb/ops.h"
#include "lb/optim/optimizer.h"
#include "testing/testing.h"

namespace lb::autograd {
namespace {

constexpr int64_t kV = 37, kD = 5;

Tensor some_indices(DType dtype, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::uniform_int_distribution<int64_t> row(0, 12);  // repeats, and most rows untouched
  std::vector<int64_t> v(24);
  for (auto& x : v) x = row(rng) * 2;
  const Tensor i64 = Tensor::from_vector(v, {4, 6});
  return dtype == DType::I64 ? i64 : i64.to(DType::I32);
}

// The gradient of sum(embedding(idx, w) * r) for w: the dense one (sink unset), and the rows
// the sink is offered (taken when `take`).
struct Grads {
  Tensor dense;
  RowSparseGrad rows;
  int offers = 0;
};

Grads embedding_grads(const Tensor& idx, DType dtype, int64_t padding_idx, bool take) {
  Tensor w = testing::randn({kV, kD}, 3, dtype);
  w.set_requires_grad();
  const Tensor r = testing::randn({4, 6, kD}, 4, dtype);
  Grads out;
  sum(embedding(idx, w, padding_idx) * r).backward();
  out.dense = w.grad();
  w.zero_grad();
  set_row_sparse_grad_sink([&](const TensorImpl* leaf, RowSparseGrad g) {
    EXPECT_EQ(leaf, w.impl());
    ++out.offers;
    out.rows = std::move(g);
    return take;
  });
  sum(embedding(idx, w, padding_idx) * r).backward();
  set_row_sparse_grad_sink({});
  if (take) EXPECT_FALSE(w.grad().defined());
  else EXPECT_EQ(w.grad().to_double_vector(), out.dense.to_double_vector());
  return out;
}

TEST(RowSparseGrad, EmbeddingRowsEqualTheDenseGradient) {
  for (DType dtype : {DType::F32, DType::F64})
    for (DType idx_dtype : {DType::I64, DType::I32})
      for (int64_t padding_idx : {int64_t{-1}, int64_t{4}}) {
        const Tensor idx = some_indices(idx_dtype, 11);
        const Grads g = embedding_grads(idx, dtype, padding_idx, true);
        ASSERT_EQ(g.offers, 1);
        // The rows: the distinct indices but padding_idx, ascending.
        std::vector<int64_t> expect;
        for (double x : idx.to_double_vector())
          if (static_cast<int64_t>(x) != padding_idx) expect.push_back(static_cast<int64_t>(x));
        std::sort(expect.begin(), expect.end());
        expect.erase(std::unique(expect.begin(), expect.end()), expect.end());
        std::vector<int64_t> rows;
        for (double x : g.rows.rows.to_double_vector()) rows.push_back(static_cast<int64_t>(x));
        ASSERT_EQ(rows, expect);
        EXPECT_EQ(g.rows.values.dtype(), dtype);
        // Bit for bit: the dense gradient is the rows' values on them, exactly zero elsewhere.
        Tensor rebuilt = Tensor::zeros({kV, kD}, dtype);
        add_row_sparse_into(rebuilt, g.rows);
        EXPECT_EQ(rebuilt.to_double_vector(), g.dense.to_double_vector());
      }
}

TEST(RowSparseGrad, DeclinedOrNoSinkGivesTheDenseGradient) {
  const Grads g = embedding_grads(some_indices(DType::I64, 5), DType::F32, -1, false);  // checks .grad inside
  EXPECT_EQ(g.offers, 1);
  // A weight that is not a leaf is never offered.
  Tensor w = testing::randn({kV, kD}, 3, DType::F32);
  w.set_requires_grad();
  int offers = 0;
  set_row_sparse_grad_sink([&](const TensorImpl*, RowSparseGrad) { return ++offers, true; });
  sum(embedding(some_indices(DType::I64, 5), w * 2.0)).backward();
  set_row_sparse_grad_sink({});
  EXPECT_EQ(offers, 0);
  EXPECT_TRUE(w.grad().defined());
}

TEST(RowSparseGrad, SumsEqualDenseSums) {
  const Grads a = embedding_grads(some_indices(DType::I64, 1), DType::F32, -1, true);
  const Grads b = embedding_grads(some_indices(DType::I64, 2), DType::F32, 6, true);
  const RowSparseGrad s = add_row_sparse(a.rows, b.rows);
  const std::vector<double> x = a.dense.to_double_vector(), y = b.dense.to_double_vector();
  Tensor rebuilt = Tensor::zeros({kV, kD});
  add_row_sparse_into(rebuilt, s);
  const std::vector<double> got = rebuilt.to_double_vector();
  for (size_t k = 0; k < x.size(); ++k)
    EXPECT_EQ(got[k], static_cast<double>(static_cast<float>(x[k]) + static_cast<float>(y[k]))) << k;
  // Rows ascending and distinct.
  const std::vector<double> rows = s.rows.to_double_vector();
  for (size_t k = 1; k < rows.size(); ++k) EXPECT_LT(rows[k - 1], rows[k]);
  EXPECT_FALSE(add_row_sparse({}, {}).defined());
  EXPECT_EQ(add_row_sparse(a.rows, {}).rows.data<int64_t>(), a.rows.rows.data<int64_t>());
}

// Three steps of one optimizer fed dense gradients and of a twin fed the same as rows.
void expect_rows_step_like_dense(DType dtype, const optim::AdamOptions& o) {
  const std::string what = std::string(dtype_name(dtype)) + ", " + std::to_string(o.state_bits) + " bits, " +
                           (o.decoupled ? "AdamW" : "Adam");
  Tensor p1 = testing::randn({kV, kD}, 21, dtype), p2 = p1.clone();
  p1.set_requires_grad();
  p2.set_requires_grad();
  optim::Adam dense({{{{"w", p1}}, 1e-2, 0.1}}, o), rows({{{{"w", p2}}, 1e-2, 0.1}}, o);
  ASSERT_TRUE(rows.takes_rows(p2.impl())) << what;
  EXPECT_FALSE(rows.takes_rows(p1.impl()));
  for (int step = 0; step < 3; ++step) {
    const Tensor idx = some_indices(DType::I64, 40 + step);
    const Tensor r = testing::randn({4, 6, kD}, 50 + step, dtype);
    sum(embedding(idx, p1) * r).backward();
    dense.step();
    dense.zero_grad();
    RowSparseGrad g;
    set_row_sparse_grad_sink([&](const TensorImpl*, RowSparseGrad x) { return g = std::move(x), true; });
    sum(embedding(idx, p2) * r).backward();
    set_row_sparse_grad_sink({});
    ASSERT_TRUE(g.defined());
    rows.begin_step();
    rows.update_parameter_rows(p2.impl(), g.rows, g.values);
    EXPECT_FALSE(p2.grad().defined());
    ASSERT_EQ(p1.to_double_vector(), p2.to_double_vector()) << what << ", step " << step;
  }
  const auto a = dense.state_tensors(), b = rows.state_tensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.to_double_vector(), b[i].second.to_double_vector()) << what << ": " << a[i].first;
}

TEST(RowSparseGrad, AdamStepsWithRowsAsWithTheDenseGradient) {
  for (bool decoupled : {true, false}) {
    optim::AdamOptions o;
    o.decoupled = decoupled;
    expect_rows_step_like_dense(DType::F64, o);
    for (int bits : {32, 8, 4}) {
      o.state_bits = bits;
      expect_rows_step_like_dense(DType::F32, o);
    }
  }
}

// A parameter with a dense gradient too: the rows are added to it and the dense update runs.
TEST(RowSparseGrad, RowsAndADenseGradientAreSummed) {
  Tensor p1 = testing::randn({kV, kD}, 21, DType::F32), p2 = p1.clone();
  p1.set_requires_grad();
  p2.set_requires_grad();
  optim::Adam dense({{{{"w", p1}}, 1e-2, 0.0}}), rows({{{{"w", p2}}, 1e-2, 0.0}});
  const Tensor idx = some_indices(DType::I64, 3);
  const Tensor r = testing::randn({4, 6, kD}, 5, DType::F32);
  sum(embedding(idx, p1) * r + sum(p1 * p1)).backward();
  dense.step();
  RowSparseGrad g;
  set_row_sparse_grad_sink([&](const TensorImpl*, RowSparseGrad x) { return g = std::move(x), true; });
  sum(embedding(idx, p2) * r + sum(p2 * p2)).backward();
  set_row_sparse_grad_sink({});
  ASSERT_TRUE(g.defined());
  ASSERT_TRUE(p2.grad().defined());  // the p2 * p2 part
  rows.begin_step();
  rows.update_parameter_rows(p2.impl(), g.rows, g.values);
  EXPECT_EQ(p1.to_double_vector(), p2.to_double_vector());
}

}  // namespace
}  // namespace lb::autograd
