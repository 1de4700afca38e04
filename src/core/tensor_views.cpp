// View operations: new shape/strides/offset over the same storage. Each is differentiable;
// the backward maps the output gradient back onto the input's geometry.
#include <algorithm>
#include <numeric>

#include "lb/autograd/node.h"
#include "lb/core/tensor.h"
#include "lb/ops/reduce.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;

// Records a view's backward: `back` maps the output gradient to the input's shape.
template <typename Fn>
Tensor finish_view(const char* name, Tensor out, const Tensor& in, Fn back) {
  if (should_record({in}))
    record(name, out, {in}, {},
           [back](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
             return std::vector<Tensor>{back(g)};
           });
  return out;
}

Shape infer_shape(const Shape& req, int64_t numel, const Shape& from) {
  Shape s = req;
  int64_t known = 1, neg = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      LB_CHECK(neg < 0, "only one -1 allowed in shape ", shape_str(req));
      neg = static_cast<int64_t>(i);
    } else {
      LB_CHECK(s[i] >= 0, "bad dimension in shape ", shape_str(req));
      LB_CHECK(!__builtin_mul_overflow(known, s[i], &known), "shape ", shape_str(req), " has more than 2^63 elements");
    }
  }
  if (neg >= 0) {
    LB_CHECK(known > 0 && numel % known == 0, "cannot reshape ", shape_str(from), " to ",
             shape_str(req));
    s[neg] = numel / known;
  }
  LB_CHECK(shape_numel(s) == numel, "cannot reshape ", shape_str(from), " (", numel,
           " elements) to ", shape_str(req));
  return s;
}

// Strides for viewing (shape, strides) as `target` without copying, if possible
// (the algorithm of PyTorch's computeStride: split/merge runs of contiguous dims).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& target, Shape& out) {
  out.assign(target.size(), 0);
  if (shape_numel(shape) <= 1 || target.empty()) {  // empty or single element: any strides
    out = contiguous_strides(target);
    return true;
  }
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor Tensor::view(const Shape& req) const {
  const Shape s = infer_shape(req, numel(), shape());
  Shape st;
  LB_CHECK(view_strides(shape(), strides(), s, st), "view ", shape_str(shape()), " -> ",
           shape_str(s), " is not possible on this memory layout; use reshape()");
  const Shape in_shape = shape();
  return finish_view("view", make_view(*this, s, st, offset()), *this,
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

Tensor Tensor::reshape(const Shape& req) const {
  const Shape s = infer_shape(req, numel(), shape());
  Shape st;
  if (view_strides(shape(), strides(), s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  const int64_t nd = dim();
  LB_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute of a ", nd, "-d tensor needs ", nd,
           " dims, got ", dims.size());
  Shape s(nd), st(nd);
  std::vector<int64_t> inv(nd, -1);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = normalize_dim(dims[i], nd);
    LB_CHECK(inv[d] < 0, "permute: repeated dim ", d);
    inv[d] = i;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  return finish_view("permute", make_view(*this, s, st, offset()), *this,
                     [inv](const Tensor& g) { return g.permute(inv); });
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> p(dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[normalize_dim(a, dim())], p[normalize_dim(b, dim())]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = normalize_dim(d, dim());
  const int64_t n = shape()[d];
  LB_CHECK(step > 0, "slice step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape(), st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  const Shape in_shape = shape();
  const DType dt = dtype();
  return finish_view("slice", make_view(*this, s, st, offset() + start * strides()[d]), *this,
                     [=](const Tensor& g) {
                       Tensor full = Tensor::zeros(in_shape, dt);
                       full.slice(d, start, end, step).copy_(g);
                       return full;
                     });
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = normalize_dim(d, dim());
  const int64_t n = shape()[d];
  LB_CHECK(index >= -n && index < n, "select index ", index, " out of range for dim ", d,
           " of size ", n);
  if (index < 0) index += n;
  return slice(d, index, index + 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& target) const {
  const int64_t nd = static_cast<int64_t>(target.size());
  LB_CHECK(nd >= dim(), "cannot expand ", shape_str(shape()), " to ", shape_str(target));
  Shape s(nd), st(nd, 0);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t j = i - (nd - dim());
    const int64_t want = target[i];
    if (j < 0) {
      LB_CHECK(want >= 0, "cannot expand to ", shape_str(target));
      s[i] = want;
      continue;
    }
    const int64_t have = shape()[j];
    if (want == -1 || want == have) {
      s[i] = have;
      st[i] = strides()[j];
    } else {
      LB_CHECK(have == 1, "cannot expand ", shape_str(shape()), " to ", shape_str(target),
               ": dim ", j, " has size ", have);
      s[i] = want;
    }
  }
  if (s == shape()) return *this;
  const Shape in_shape = shape();
  return finish_view("expand", make_view(*this, s, st, offset()), *this,
                     [in_shape](const Tensor& g) { return sum_to(g, in_shape); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = normalize_dim(d, dim() + 1);
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = normalize_dim(d, dim());
  LB_CHECK(shape()[d] == 1, "squeeze dim ", d, " has size ", shape()[d], ", not 1");
  Shape s = shape();
  s.erase(s.begin() + d);
  Shape st = strides();
  st.erase(st.begin() + d);
  const Shape in_shape = shape();
  return finish_view("squeeze", make_view(*this, s, st, offset()), *this,
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = normalize_dim(start, dim());
  end = normalize_dim(end, dim());
  Shape s(shape().begin(), shape().begin() + start);
  int64_t m = 1;
  for (int64_t i = start; i <= end; ++i) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(s);
}

}  // namespace lb
