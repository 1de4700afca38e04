// Tensor creation, metadata, element access, copies and dtype/device conversion.
#include "lb/core/tensor.h"

#include <cstring>
#include <sstream>

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/node.h"
#include "lb/core/strided.h"
#include "src/backend/copy.h"
#include "src/core/element_convert.h"

namespace lb {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  // Checked: shapes come from files (safetensors headers, config.json sizes); a product past
  // int64 must be an error, not a wrapped count that later under-allocates. A zero dim makes
  // the product 0 whatever the others are.
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    LB_CHECK(d >= 0, "negative dimension in shape ", shape_str(s));
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  LB_CHECK(!overflow, "shape ", shape_str(s), " has more than 2^63 elements");
  return n;
}

int64_t shape_nbytes(const Shape& s, DType dtype) {
  int64_t bytes = 0;
  LB_CHECK(!__builtin_mul_overflow(shape_numel(s), static_cast<int64_t>(dtype_size(dtype)), &bytes),
           "shape ", shape_str(s), " of ", dtype_name(dtype), " needs more than 2^63 bytes");
  return bytes;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

int64_t normalize_dim(int64_t d, int64_t ndim) {
  const int64_t n = ndim == 0 ? 1 : ndim;
  LB_CHECK(d >= -n && d < n, "dimension ", d, " out of range for a ", ndim, "-d tensor");
  return d < 0 ? d + n : d;
}

// ---------------------------------------------------------------- creation
Tensor Tensor::empty(const Shape& shape, DType dtype, Device device, MemTag tag) {
  for (int64_t d : shape) LB_CHECK(d >= 0, "negative dimension in shape ", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(shape_nbytes(shape, dtype)), device, tag);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

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
  return dtype == DType::F64 ? t : t.to(dtype);
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// ---------------------------------------------------------------- metadata
static TensorImpl& checked(const std::shared_ptr<TensorImpl>& p) {
  LB_CHECK(p != nullptr, "operation on an undefined tensor");
  return *p;
}

const Shape& Tensor::shape() const { return checked(impl_).shape; }
const Shape& Tensor::strides() const { return checked(impl_).strides; }
int64_t Tensor::offset() const { return checked(impl_).offset; }
int64_t Tensor::size(int64_t d) const { return shape()[normalize_dim(d, dim())]; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const { return checked(impl_).dtype; }
Device Tensor::device() const { return checked(impl_).storage->device(); }
const std::shared_ptr<Storage>& Tensor::storage() const { return checked(impl_).storage; }

bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  const Shape& st = strides();
  int64_t acc = 1;
  for (int64_t i = static_cast<int64_t>(s.size()) - 1; i >= 0; --i) {
    if (s[i] != 1 && st[i] != acc) return false;
    acc *= s[i];
  }
  return true;
}

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::ostringstream os;
  os << "Tensor(" << dtype_name(dtype()) << ", " << shape_str(shape()) << ", " << device().str()
     << ")";
  return os.str();
}

void* Tensor::raw_data() const {
  LB_CHECK(defined(), "data access on an undefined tensor");
  return static_cast<char*>(storage()->data()) + offset() * dtype_size(dtype());
}

// ---------------------------------------------------------------- element conversion
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

// ---------------------------------------------------------------- copies
void Tensor::copy_(const Tensor& src) {
  Tensor s = src.shape() == shape() ? src : src.expand(shape());
  if (!(s.device() == device())) s = s.to(device());  // moved whole (contiguous), then copied
  backend::copy_kernels(device()).copy(*this, s);
}

void Tensor::fill_(double value) {
  if (numel() == 0) return;
  backend::copy_kernels(device()).fill(*this, value);
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape(), dtype(), device());
  out.copy_(*this);
  if (autograd::should_record({*this}))
    autograd::record("clone", out, {*this}, {},
                     [](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
                       return std::vector<Tensor>{g};
                     });
  return out;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype()) return *this;
  Tensor out = empty(shape(), dt, device());
  out.copy_(*this);
  if (dtype_is_floating(dt) && dtype_is_floating(dtype()) && autograd::should_record({*this})) {
    const DType back = dtype();
    autograd::record("to_dtype", out, {*this}, {},
                     [back](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
                       return std::vector<Tensor>{g.to(back)};
                     });
  }
  return out;
}

#ifndef LEANBACK_WITH_CUDA
Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  LB_FAIL("cannot move ", str(), " to ", d.str(), ": this build has no CUDA (LEANBACK_CUDA=OFF)");
}
#endif

// ---------------------------------------------------------------- autograd accessors
bool Tensor::requires_grad() const { return checked(impl_).requires_grad; }

Tensor& Tensor::set_requires_grad(bool r) {
  LB_CHECK(checked(impl_).grad_fn == nullptr,
           "set_requires_grad on a non-leaf tensor; use detach() first");
  LB_CHECK(!r || dtype_is_floating(dtype()), "only floating-point tensors can require grad, got ",
           dtype_name(dtype()));
  impl_->requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const { return checked(impl_).grad; }
void Tensor::set_grad(const Tensor& g) { checked(impl_).grad = g; }
void Tensor::zero_grad() { checked(impl_).grad = Tensor(); }
const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const { return checked(impl_).grad_fn; }
bool Tensor::is_leaf() const { return checked(impl_).grad_fn == nullptr; }

Tensor Tensor::detach() const { return make_view(*this, shape(), strides(), offset()); }

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  autograd::run_backward(*this, grad_output, retain_graph);
}

}  // namespace lb
