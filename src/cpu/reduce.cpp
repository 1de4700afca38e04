// CPU reduction kernels (src/backend/reduce.h). Sums: a leading block of reduced axes on a
// contiguous tensor is summed as columns (no copy: the bias-gradient case); otherwise the
// reduced axes are moved last (a copy) and each output element is the sum of one contiguous
// row. Max: one output element per iteration, walking its axis.
#include "src/backend/reduce.h"

#include <algorithm>

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "src/backend/copy.h"

namespace lb::backend {
namespace {

void sum(const Tensor& x, const std::vector<int64_t>& dims, Tensor& out) {
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
      Tensor xp = backend::contiguous(make_view(x, ps, pst, x.offset()));
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
}

void max(const Tensor& x, int64_t dim, Tensor& values, Tensor& indices) {
  const int64_t nd = x.dim();
  const Shape& keep = values.shape();
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

void max_backward(const Tensor& g, const Tensor& indices, int64_t dim, Tensor& gx) {
  const Shape& keep = indices.shape();
  const Tensor gk = backend::contiguous(g);
  const int64_t* ix = indices.data<int64_t>();
  const int64_t nd = gx.dim();
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
}

}  // namespace

const ReduceKernels kCpuReduce{sum, max, max_backward};

}  // namespace lb::backend
