// Views as geometry (lb/core/views.h): shape, strides and offset over the same storage.
#include "lb/core/views.h"

#include "lb/core/checks.h"

#include <algorithm>
#include <numeric>

namespace lb::views {

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

// The algorithm of PyTorch's computeStride: split and merge runs of contiguous dims.
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
Tensor view(const Tensor& t, const Shape& req) {
  const Shape s = infer_shape(req, t.numel(), t.shape());
  Shape st;
  LB_CHECK(view_strides(t.shape(), t.strides(), s, st), "view ", shape_str(t.shape()), " -> ", shape_str(s),
           " is not possible on this memory layout; use reshape()");
  return make_view(t, s, st, t.offset());
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  const int64_t nd = t.dim();
  LB_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute of a ", nd, "-d tensor needs ", nd, " dims, got ",
           dims.size());
  Shape s(nd), st(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t d = normalize_dim(dims[i], nd);
    LB_CHECK(!seen[d], "permute: repeated dim ", d);
    seen[d] = true;
    s[i] = t.shape()[d];
    st[i] = t.strides()[d];
  }
  return make_view(t, s, st, t.offset());
}

Tensor transpose(const Tensor& t, int64_t a, int64_t b) {
  std::vector<int64_t> p(t.dim());
  std::iota(p.begin(), p.end(), 0);
  std::swap(p[normalize_dim(a, t.dim())], p[normalize_dim(b, t.dim())]);
  return permute(t, p);
}

Tensor slice(const Tensor& t, int64_t d, int64_t start, int64_t end, int64_t step) {
  d = normalize_dim(d, t.dim());
  const int64_t n = t.shape()[d];
  LB_CHECK(step > 0, "slice step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = t.shape(), st = t.strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return make_view(t, s, st, t.offset() + start * t.strides()[d]);
}

Tensor squeeze(const Tensor& t, int64_t d) {
  d = normalize_dim(d, t.dim());
  LB_CHECK(t.shape()[d] == 1, "squeeze dim ", d, " has size ", t.shape()[d], ", not 1");
  Shape s = t.shape(), st = t.strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return make_view(t, s, st, t.offset());
}

Tensor select(const Tensor& t, int64_t d, int64_t index) {
  d = normalize_dim(d, t.dim());
  const int64_t n = t.shape()[d];
  LB_CHECK(index >= -n && index < n, "select index ", index, " out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return squeeze(slice(t, d, index, index + 1), d);
}

Tensor expand(const Tensor& t, const Shape& target) {
  const int64_t nd = static_cast<int64_t>(target.size()), have_nd = t.dim();
  LB_CHECK(nd >= have_nd, "cannot expand ", shape_str(t.shape()), " to ", shape_str(target));
  Shape s(nd), st(nd, 0);
  for (int64_t i = 0; i < nd; ++i) {
    const int64_t j = i - (nd - have_nd);
    const int64_t want = target[i];
    if (j < 0) {
      LB_CHECK(want >= 0, "cannot expand to ", shape_str(target));
      s[i] = want;
      continue;
    }
    const int64_t have = t.shape()[j];
    if (want == -1 || want == have) {
      s[i] = have;
      st[i] = t.strides()[j];
    } else {
      LB_CHECK(have == 1, "cannot expand ", shape_str(t.shape()), " to ", shape_str(target), ": dim ", j,
               " has size ", have);
      s[i] = want;
    }
  }
  if (s == t.shape()) return t;
  return make_view(t, s, st, t.offset());
}

}  // namespace lb::views

namespace lb::detail {

// lb/core/checks.h: the strides of a broadcast view.
Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size()), td = t.dim();
  Shape st(nd, 0);
  for (int64_t i = 0; i < td; ++i) {
    const int64_t j = nd - td + i;
    if (t.shape()[i] != 1) st[j] = t.strides()[i];
  }
  return st;
}

}  // namespace lb::detail
