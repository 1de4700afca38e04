// Tensor creation, metadata and raw access: what needs no kernel and no tape. The methods that
// run kernels are in src/backend/tensor_data.cpp, those that record on the tape in
// src/autograd/tensor_autograd.cpp and src/ops/tensor_views.cpp.
#include "lb/core/tensor.h"

#include <cstring>
#include <sstream>

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

}  // namespace lb
