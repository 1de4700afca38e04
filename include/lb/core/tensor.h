// Tensor: a cheap, shallow-copied handle (shared_ptr) to a strided view of a Storage.
// Copies of a Tensor refer to the same data; use clone() for a deep copy.
// Autograd state (requires_grad, grad, grad_fn) lives on the handle's impl.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lb/core/device.h"
#include "lb/core/dtype.h"
#include "lb/core/error.h"
#include "lb/core/storage.h"

namespace lb {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "(2, 3)"
int64_t shape_numel(const Shape& s);  // checked: negative dims and int64 overflow are errors
int64_t shape_nbytes(const Shape& s, DType dtype);  // numel × element size, checked
Shape contiguous_strides(const Shape& s);

namespace autograd {
class Node;
}

struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (contiguous, on `device`, allocated under `tag`) ----
  static Tensor empty(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      MemTag tag = MemTag::Other);
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu(),
                      MemTag tag = MemTag::Other);
  static Tensor ones(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::F32,
                     Device device = Device::cpu());
  static Tensor scalar(double value, DType dtype = DType::F32);
  static Tensor arange(int64_t n, DType dtype = DType::I64);
  template <typename T>
  static Tensor from_vector(const std::vector<T>& v, const Shape& shape);

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& strides() const;
  int64_t offset() const;  // in elements
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  size_t nbytes() const { return numel() * dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const;
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& o) const { return impl_ == o.impl_; }
  std::string str() const;  // "Tensor(f32, (2, 3), cpu)"

  // ---- raw access (CPU; offset applied) ----
  void* raw_data() const;
  template <typename T> T* data() const;  // checks dtype
  template <typename T> T item() const;   // single-element tensor
  double item_double() const;             // any dtype, converted
  std::vector<double> to_double_vector() const;  // any dtype/layout, row-major order

  // ---- views (share storage; differentiable) ----
  Tensor view(const Shape& shape) const;     // requires compatible strides; -1 allowed
  Tensor reshape(const Shape& shape) const;  // view if possible, else contiguous copy
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops `dim`
  Tensor expand(const Shape& shape) const;          // broadcast view (stride 0)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor contiguous() const;  // this if already contiguous, else a copy (differentiable)

  // ---- copies and conversion (not views) ----
  Tensor clone() const;            // differentiable deep copy
  Tensor to(DType dtype) const;    // differentiable between float types
  Tensor to(Device device) const;
  void copy_(const Tensor& src);   // in place, no autograd; broadcasts src; converts dtype
  void fill_(double value);        // in place, no autograd
  void zero_() { fill_(0.0); }

  // ---- autograd ----
  bool requires_grad() const;
  Tensor& set_requires_grad(bool r = true);  // leaves only
  Tensor grad() const;                       // undefined if none
  void set_grad(const Tensor& g);
  void zero_grad();                          // drops .grad
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  bool is_leaf() const;
  Tensor detach() const;  // shares storage, no history
  // Backpropagates from this tensor. A scalar may omit `grad_output` (taken as 1).
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;
  DType dtype = DType::F32;
  bool requires_grad = false;
  Tensor grad;
  // What a leaf's gradient counts as: the model's (a parameter's), or activation memory for
  // a leaf that stands in for an activation (a recomputed block's input).
  MemTag grad_tag = MemTag::Gradient;
  std::shared_ptr<autograd::Node> grad_fn;
};

// Internal: a view of `base`'s storage with the given geometry (no autograd).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

int64_t normalize_dim(int64_t d, int64_t ndim);  // wraps negatives, checks range

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& v, const Shape& shape) {
  LB_CHECK(static_cast<int64_t>(v.size()) == shape_numel(shape), "from_vector: ", v.size(),
           " values for shape ", shape_str(shape));
  Tensor t = empty(shape, DTypeOf<T>::value);
  if (!v.empty()) {
    T* p = t.data<T>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = v[i];
  }
  return t;
}

template <typename T>
T* Tensor::data() const {
  LB_CHECK(defined(), "data() on an undefined tensor");
  LB_CHECK(dtype() == DTypeOf<T>::value, "data<", dtype_name(DTypeOf<T>::value), ">() on a ",
           dtype_name(dtype()), " tensor");
  return static_cast<T*>(raw_data());
}

template <typename T>
T Tensor::item() const {
  LB_CHECK(numel() == 1, "item() needs one element, got shape ", shape_str(shape()));
  if (!device().is_cpu()) return to(Device::cpu()).item<T>();  // a copy to the host, as torch's .item()
  return *data<T>();
}

}  // namespace lb
