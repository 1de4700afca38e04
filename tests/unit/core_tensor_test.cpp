// Tensor core: creation, views, copies, dtype conversion, allocator accounting, errors.
#include <gtest/gtest.h>

#include "lb/core/views.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb {
namespace {

TEST(Tensor, CreateAndFill) {
  Tensor t = Tensor::full({2, 3}, 1.5);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.is_contiguous());
  for (double v : t.to_double_vector()) EXPECT_EQ(v, 1.5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  Tensor tt = t.transpose(0, 1);
  EXPECT_EQ(tt.shape(), (Shape{3, 2}));
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_EQ(tt.to_double_vector(), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  Tensor s = t.slice(1, 1, 3);
  EXPECT_EQ(s.to_double_vector(), (std::vector<double>{1, 2, 4, 5}));
  s.fill_(9);
  EXPECT_EQ(t.to_double_vector(), (std::vector<double>{0, 9, 9, 3, 9, 9}));
  Tensor e = Tensor::from_vector<float>({1, 2}, {2, 1}).expand({2, 3});
  EXPECT_EQ(e.to_double_vector(), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(t.reshape({3, 2}).shape(), (Shape{3, 2}));
  EXPECT_EQ(tt.reshape({6}).to_double_vector(), (std::vector<double>{0, 3, 9, 9, 9, 9}));
  EXPECT_THROW(tt.view({6}), Error);
  EXPECT_EQ(t.permute({1, 0}).contiguous().to_double_vector(), tt.to_double_vector());
  EXPECT_EQ(t.select(0, 1).to_double_vector(), (std::vector<double>{3, 9, 9}));
  EXPECT_EQ(t.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(t.flatten().shape(), (Shape{6}));
  EXPECT_EQ(t.slice(1, 0, 3, 2).to_double_vector(), (std::vector<double>{0, 9, 3, 9}));
}

// The kernels' tape-free views (lb/core/views.h) give Tensor's views' geometry, and record
// nothing even on a tensor that requires grad; Tensor's record one node each.
TEST(Tensor, CoreViewsMatchTensorViewsWithoutTape) {
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {2, 3, 2});
  x.set_requires_grad();
  auto same = [](const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    EXPECT_EQ(a.strides(), b.strides());
    EXPECT_EQ(a.offset(), b.offset());
    EXPECT_EQ(a.storage(), b.storage());
  };
  const std::vector<std::pair<Tensor, Tensor>> pairs{
      {views::view(x, {3, -1}), x.view({3, -1})},
      {views::transpose(x, 0, 2), x.transpose(0, 2)},
      {views::permute(x, {2, 0, 1}), x.permute({2, 0, 1})},
      {views::slice(x, 1, -2, 3, 1), x.slice(1, -2, 3, 1)},
      {views::select(x, 1, -1), x.select(1, -1)},
      {views::expand(views::slice(x, 1, 0, 1), {2, 4, 2}), x.slice(1, 0, 1).expand({2, 4, 2})},
      {views::squeeze(views::slice(x, 2, 1, 2), 2), x.slice(2, 1, 2).squeeze(2)}};
  for (const auto& [plain, taped] : pairs) {
    same(plain, taped);
    EXPECT_EQ(plain.grad_fn(), nullptr);
    EXPECT_NE(taped.grad_fn(), nullptr);
  }
  EXPECT_TRUE(views::expand(x, {2, 3, 2}).same(x));
  EXPECT_THROW(views::view(x.transpose(0, 2), {12}), Error);
  EXPECT_THROW(views::permute(x, {0, 0, 1}), Error);
}

TEST(Tensor, DtypeConversions) {
  Tensor t = Tensor::from_vector<float>({1.f, -2.5f, 3.25f, 65504.f}, {4});
  for (DType d : {DType::F64, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    Tensor back = t.to(d).to(DType::F32);
    auto v = back.to_double_vector();
    EXPECT_EQ(v[0], 1.0) << dtype_name(d);
    EXPECT_EQ(v[1], d == DType::I32 || d == DType::I64 ? -2.0 : -2.5) << dtype_name(d);
  }
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.f)), 65504.f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.25f)), 3.25f);
  EXPECT_EQ(dtype_size(DType::Bool), 1u);
  EXPECT_THROW(dtype_from_name("f8"), Error);
}

TEST(Tensor, AllocatorCountsByTag) {
  const MemStats before = cpu_allocator().stats();
  {
    Tensor p = Tensor::empty({1000}, DType::F32, Device::cpu(), MemTag::Parameter);
    const MemStats mid = cpu_allocator().stats();
    EXPECT_EQ(mid.current[int(MemTag::Parameter)] - before.current[int(MemTag::Parameter)], 4000);
  }
  EXPECT_EQ(cpu_allocator().stats().current[int(MemTag::Parameter)],
            before.current[int(MemTag::Parameter)]);
}

// Sizes from files are checked before anything is allocated: element counts past int64
// (which used to wrap), byte counts past int64, and more memory than the machine has.
TEST(Tensor, HugeShapesAreNamedErrorsNotCrashes) {
  const int64_t big = int64_t{1} << 62;
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { (void)shape_numel({big, big}); }).find("more than 2^63 elements"), std::string::npos);
  EXPECT_EQ(shape_numel({big, big, 0}), 0);  // a zero dimension: empty, whatever the others
  EXPECT_NE(message([&] { (void)shape_numel({3, -2}); }).find("negative dimension"), std::string::npos);
  EXPECT_NE(message([&] { (void)Tensor::empty({int64_t{1} << 31, int64_t{1} << 31}); }).find("more than 2^63 bytes"),
            std::string::npos);
  const std::string m = message([&] { (void)Tensor::empty({int64_t{1} << 40}); });  // 4 TiB of f32
  EXPECT_NE(m.find("cannot allocate 4398046511104 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("GiB of memory"), std::string::npos) << m;
  EXPECT_NE(message([&] { (void)Tensor::zeros({4}).reshape({-1, big, big}); }).find("2^63"), std::string::npos);
}

TEST(Tensor, ErrorsAreLbErrors) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_THROW(a.view({4}), Error);
  EXPECT_THROW(a.permute({0, 0}), Error);
  EXPECT_THROW(a.size(2), Error);
  EXPECT_THROW(a.data<double>(), Error);
  EXPECT_THROW(a.expand({3, 3}), Error);
  EXPECT_THROW(Tensor().shape(), Error);
  EXPECT_THROW(Device::parse("gpu"), Error);
}

}  // namespace
}  // namespace lb
