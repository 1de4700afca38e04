// Tensor's methods that run kernels (fills, copies, host reads), and the kernel plumbing's
// tape-free copies (src/backend/copy.h).
#include "lb/core/strided.h"
#include "lb/core/tensor.h"
#include "lb/core/views.h"
#include "src/backend/copy.h"
#include "src/core/element_convert.h"

namespace lb {

namespace backend {

Tensor contiguous(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device());
  out.copy_(t);
  return out;
}

Tensor reshape(const Tensor& t, const Shape& shape) {
  const Shape s = views::infer_shape(shape, t.numel(), t.shape());
  Shape st;
  if (views::view_strides(t.shape(), t.strides(), s, st)) return make_view(t, s, st, t.offset());
  return views::view(contiguous(t), s);
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t;
  Tensor out = Tensor::empty(t.shape(), dtype, t.device());
  out.copy_(t);
  return out;
}

}  // namespace backend

// ---------------------------------------------------------------- creation
Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device, MemTag tag) {
  Tensor t = empty(shape, dtype, device, tag);
  t.fill_(0.0);
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype, Device device) {
  return full(shape, 1.0, dtype, device);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

Tensor Tensor::arange(int64_t n, DType dtype) {
  Tensor t = empty({n}, DType::F64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(i);
  return dtype == DType::F64 ? t : backend::to_dtype(t, dtype);
}

// ---------------------------------------------------------------- copies
void Tensor::copy_(const Tensor& src) {
  Tensor s = src.shape() == shape() ? src : views::expand(src, shape());
  if (!(s.device() == device())) s = s.to(device());  // moved whole (contiguous), then copied
  backend::copy_kernels(device()).copy(*this, s);
}

void Tensor::fill_(double value) {
  if (numel() == 0) return;
  backend::copy_kernels(device()).fill(*this, value);
}

#ifndef LEANBACK_WITH_CUDA
Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  LB_FAIL("cannot move ", str(), " to ", d.str(), ": this build has no CUDA (LEANBACK_CUDA=OFF)");
}
#endif

// ---------------------------------------------------------------- host reads
namespace {
using detail::load_as_double;
}  // namespace

double Tensor::item_double() const {
  LB_CHECK(numel() == 1, "item() needs one element, got shape ", shape_str(shape()));
  if (!device().is_cpu()) return to(Device::cpu()).item_double();  // a copy to the host
  return load_as_double(raw_data(), 0, dtype());
}

std::vector<double> Tensor::to_double_vector() const {
  if (!device().is_cpu()) return to(Device::cpu()).to_double_vector();  // a copy to the host
  std::vector<double> out;
  out.reserve(numel());
  const void* base = storage()->data();
  const int64_t n = detail::last_dim(shape()), s = detail::last_stride(strides());
  const DType t = dtype();
  detail::for_each_row<1>(shape(), {&strides()}, {offset()}, [&](const std::array<int64_t, 1>& o) {
    for (int64_t i = 0; i < n; ++i) out.push_back(load_as_double(base, o[0] + i * s, t));
  });
  return out;
}

}  // namespace lb
