// Tensor's view methods: the geometry of lb/core/views.h plus each view's backward, which maps
// the output gradient back onto the input's geometry.
#include "lb/autograd/kept_input.h"
#include "lb/autograd/node.h"
#include "lb/core/tensor.h"
#include "lb/core/views.h"
#include "lb/ops/reduce.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;

// Records a view's backward: `back` maps the output gradient to the input's shape. A view of
// an output the tape can recompute can be recomputed too: the same geometry over the
// recomputed (contiguous) input (exact lean, lb/autograd/kept_input.h).
template <typename Fn>
Tensor finish_view(const char* name, Tensor out, const Tensor& in, Fn back) {
  if (should_record({in})) {
    record(name, out, {in}, {},
           [back](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
             return std::vector<Tensor>{back(g)};
           });
    if (autograd::Node::OutputRecipe r = autograd::recipe_of(in); r.fn)
      out.grad_fn()->set_output_recipe(
          {std::move(r.kept), [fn = std::move(r.fn), shape = out.shape(), strides = out.strides(),
                               offset = out.offset()](const std::vector<Tensor>& kept) {
             return make_view(fn(kept), shape, strides, offset);
           }});
  }
  return out;
}
}  // namespace

Tensor Tensor::view(const Shape& req) const {
  const Shape in_shape = shape();
  return finish_view("view", views::view(*this, req), *this,
                     [in_shape](const Tensor& g) { return g.reshape(in_shape); });
}

Tensor Tensor::reshape(const Shape& req) const {
  const Shape s = views::infer_shape(req, numel(), shape());
  Shape st;
  if (views::view_strides(shape(), strides(), s, st)) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  const int64_t nd = dim();
  Tensor out = views::permute(*this, dims);  // checks dims
  std::vector<int64_t> inv(nd);
  for (int64_t i = 0; i < nd; ++i) inv[normalize_dim(dims[i], nd)] = i;
  return finish_view("permute", out, *this, [inv](const Tensor& g) { return g.permute(inv); });
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> p(dim());
  for (int64_t i = 0; i < dim(); ++i) p[i] = i;
  std::swap(p[normalize_dim(a, dim())], p[normalize_dim(b, dim())]);
  return permute(p);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  Tensor out = views::slice(*this, d, start, end, step);  // checks and clamps
  const Shape in_shape = shape();
  const DType dt = dtype();
  return finish_view("slice", out, *this, [=](const Tensor& g) {
    Tensor full = Tensor::zeros(in_shape, dt, g.device());
    views::slice(full, d, start, end, step).copy_(g);
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
  Tensor out = views::expand(*this, target);
  if (out.same(*this)) return *this;
  const Shape in_shape = shape();
  return finish_view("expand", out, *this, [in_shape](const Tensor& g) { return sum_to(g, in_shape); });
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = normalize_dim(d, dim() + 1);
  Shape s = shape();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  const Shape in_shape = shape();
  return finish_view("squeeze", views::squeeze(*this, d), *this,
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
