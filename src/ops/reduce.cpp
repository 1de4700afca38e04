// Reductions: sum/mean over any set of axes, max/argmax along one axis, sum_to.
// Strategy: a leading block of reduced axes on a contiguous tensor is summed as columns (no
// copy: the bias-gradient case); otherwise the reduced axes are moved last (a copy) and each
// output element is the sum of one contiguous row.
#include "lb/ops/reduce.h"

#include <algorithm>
#include <limits>

#include "lb/autograd/node.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/elementwise.h"

namespace lb {

namespace {
using autograd::record;
using autograd::should_record;

std::vector<int64_t> normalize_dims(std::vector<int64_t> dims, int64_t nd) {
  if (dims.empty())
    for (int64_t i = 0; i < nd; ++i) dims.push_back(i);
  for (auto& d : dims) d = normalize_dim(d, nd);
  std::sort(dims.begin(), dims.end());
  LB_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), "repeated reduction axis");
  if (nd == 0) dims.clear();
  return dims;
}

Shape reduced_shape(const Shape& s, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
    const bool red = std::binary_search(dims.begin(), dims.end(), i);
    if (!red) out.push_back(s[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

// Sum over `dims` without autograd; result has keepdim shape.
Tensor sum_raw(const Tensor& x, const std::vector<int64_t>& dims) {
  const Shape keep = reduced_shape(x.shape(), dims, true);
  Tensor out = Tensor::empty(keep, x.dtype(), x.device());
  const int64_t nd = x.dim();
  // Case 1: reduced axes are a leading block and x is contiguous: column sums.
  bool leading = true;
  for (size_t i = 0; i < dims.size(); ++i) leading &= dims[i] == static_cast<int64_t>(i);
  detail::dispatch_float(x.dtype(), "sum", [&](auto tag_) { using T = decltype(tag_);
    T* o = out.data<T>();
    const int64_t n_out = out.numel();
    if (leading && x.is_contiguous()) {
      const int64_t rows = n_out == 0 ? 0 : x.numel() / n_out;
      const T* p = x.data<T>();
      std::fill(o, o + n_out, T(0));
      // Split columns across threads; each walks all rows for its columns (rows stream).
#pragma omp parallel if (x.numel() > (1 << 16))
      {
#pragma omp for schedule(static)
        for (int64_t c0 = 0; c0 < n_out; c0 += 256) {
          const int64_t c1 = std::min<int64_t>(n_out, c0 + 256);
          for (int64_t r = 0; r < rows; ++r) {
            const T* row = p + r * n_out;
            for (int64_t c = c0; c < c1; ++c) o[c] += row[c];
          }
        }
      }
    } else {
      // General: permute kept axes first, reduced axes last, then row sums.
      std::vector<int64_t> perm;
      for (int64_t i = 0; i < nd; ++i)
        if (!std::binary_search(dims.begin(), dims.end(), i)) perm.push_back(i);
      for (int64_t d : dims) perm.push_back(d);
      Shape ps(nd), pst(nd);
      for (int64_t i = 0; i < nd; ++i) {
        ps[i] = x.shape()[perm[i]];
        pst[i] = x.strides()[perm[i]];
      }
      Tensor xp = detail::contiguous_nograd(make_view(x, ps, pst, x.offset()));
      const T* p = xp.data<T>();
      const int64_t len = n_out == 0 ? 0 : x.numel() / n_out;
#pragma omp parallel for if (x.numel() > (1 << 16)) schedule(static)
      for (int64_t i = 0; i < n_out; ++i) {
        T acc = 0;
        const T* row = p + i * len;
        for (int64_t j = 0; j < len; ++j) acc += row[j];
        o[i] = acc;
      }
    }
  });
  return out;
}
}  // namespace

Tensor sum(const Tensor& x, std::vector<int64_t> dims_in, bool keepdim) {
  detail::check_defined(x, "sum", "x");
  detail::check_cpu(x, "sum");
  detail::check_floating(x, "sum");
  const std::vector<int64_t> dims = normalize_dims(std::move(dims_in), x.dim());
  Tensor out = sum_raw(x, dims);
  if (!keepdim) out = make_view(out, reduced_shape(x.shape(), dims, false),
                                contiguous_strides(reduced_shape(x.shape(), dims, false)), 0);
  if (should_record({x})) {
    const Shape in_shape = x.shape(), keep = reduced_shape(x.shape(), dims, true);
    record("sum", out, {x}, {},
           [in_shape, keep](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
             return std::vector<Tensor>{detail::contiguous_nograd(g.reshape(keep).expand(in_shape))};
           });
  }
  return out;
}

Tensor mean(const Tensor& x, std::vector<int64_t> dims_in, bool keepdim) {
  detail::check_defined(x, "mean", "x");
  const std::vector<int64_t> dims = normalize_dims(dims_in, x.dim());
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[d];
  return mul_scalar(sum(x, dims, keepdim), count == 0 ? 0.0 : 1.0 / static_cast<double>(count));
}

namespace {
// Index of the first maximum along `dim` for each output position (keepdim layout), plus values.
void max_raw(const Tensor& x, int64_t dim, Tensor& values, Tensor& indices) {
  const int64_t nd = x.dim();
  LB_CHECK(x.numel() > 0 && (nd == 0 || x.shape()[dim] > 0), "max of an empty tensor ", x.str());
  Shape keep = x.shape();
  if (nd > 0) keep[dim] = 1;
  values = Tensor::empty(keep, x.dtype(), x.device());
  indices = Tensor::empty(keep, DType::I64, x.device());
  const int64_t len = nd == 0 ? 1 : x.shape()[dim];
  const int64_t stride = nd == 0 ? 1 : x.strides()[dim];
  detail::dispatch_float(x.dtype(), "max", [&](auto tag_) { using T = decltype(tag_);
    const T* base = static_cast<const T*>(x.storage()->data());
    T* v = values.data<T>();
    int64_t* ix = indices.data<int64_t>();
    const int64_t n_out = values.numel();
#pragma omp parallel for if (x.numel() > (1 << 16)) schedule(static)
    for (int64_t o = 0; o < n_out; ++o) {
      int64_t rem = o, off = x.offset();
      for (int64_t d = nd - 1; d >= 0; --d) {
        const int64_t i = rem % keep[d];
        rem /= keep[d];
        off += i * x.strides()[d];
      }
      T best = base[off];
      int64_t bi = 0;
      for (int64_t j = 1; j < len; ++j) {
        const T val = base[off + j * stride];
        if (val > best || (val != val && best == best)) {
          best = val;
          bi = j;
        }
      }
      v[o] = best;
      ix[o] = bi;
    }
  });
}
}  // namespace

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, "max", "x");
  detail::check_cpu(x, "max");
  detail::check_floating(x, "max");
  dim = normalize_dim(dim, x.dim());
  Tensor values, indices;
  max_raw(x, dim, values, indices);
  if (!keepdim && x.dim() > 0) values = values.squeeze(dim);
  if (should_record({x})) {
    const Shape in_shape = x.shape();
    const Shape keep = indices.shape();
    record("max", values, {x}, {indices},
           [in_shape, keep, dim](const Tensor& g, const std::vector<Tensor>& s,
                                 const std::vector<bool>&) {
             Tensor gx = Tensor::zeros(in_shape, g.dtype());
             Tensor gk = detail::contiguous_nograd(g.reshape(keep));
             const int64_t* ix = s[0].data<int64_t>();
             const int64_t nd = static_cast<int64_t>(in_shape.size());
             const Shape st = gx.strides();
             detail::dispatch_float(g.dtype(), "max backward", [&](auto tag_) { using T = decltype(tag_);
               T* out = gx.data<T>();
               const T* gp = gk.data<T>();
               for (int64_t o = 0; o < gk.numel(); ++o) {
                 int64_t rem = o, off = 0;
                 for (int64_t d = nd - 1; d >= 0; --d) {
                   const int64_t i = rem % keep[d];
                   rem /= keep[d];
                   off += i * st[d];
                 }
                 out[off + (nd == 0 ? 0 : ix[o] * st[dim])] += gp[o];
               }
             });
             return std::vector<Tensor>{gx};
           });
  }
  return values;
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  detail::check_defined(x, "argmax", "x");
  detail::check_cpu(x, "argmax");
  detail::check_floating(x, "argmax");
  dim = normalize_dim(dim, x.dim());
  Tensor values, indices;
  max_raw(x, dim, values, indices);
  if (!keepdim && x.dim() > 0) {
    Shape s = indices.shape();
    s.erase(s.begin() + dim);
    indices = make_view(indices, s, contiguous_strides(s), 0);
  }
  return indices;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  LB_CHECK(lead >= 0, "sum_to: cannot reduce ", shape_str(x.shape()), " to ", shape_str(shape));
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < lead) {
      dims.push_back(i);
    } else {
      const int64_t want = shape[i - lead];
      LB_CHECK(want == x.shape()[i] || want == 1, "sum_to: cannot reduce ",
               shape_str(x.shape()), " to ", shape_str(shape));
      if (want == 1 && x.shape()[i] != 1) dims.push_back(i);
    }
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace lb
