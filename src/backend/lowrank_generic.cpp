// INSTANT's low-rank kernels written with views (lb/core/views.h) and the device's GEMM,
// elementwise, reduction and gather tables (src/backend/lowrank.h): every projection is one
// batched GEMM whose output is a view of the (R, S, C) buffer — no copies — or, for
// padding-free sequences of different lengths, one GEMM per sequence. The CUDA table uses
// these; the CPU tests run them against the CPU kernels.
#include <atomic>
#include <vector>

#include "lb/core/views.h"
#include "src/backend/copy.h"
#include "src/backend/elementwise.h"
#include "src/backend/gemm.h"
#include "src/backend/lowrank.h"
#include "src/backend/reduce.h"
#include "src/backend/shape_ops.h"

namespace lb::backend::generic_lowrank {

namespace {
// Sequence s of a padding-free call: rows offsets[s] .. offsets[s+1].
struct Segment {
  int64_t start, length;
};
Segment segment(const std::vector<int64_t>& offsets, size_t s) {
  return {offsets[s], offsets[s + 1] - offsets[s]};
}

// a (or its transpose) times b (or its transpose), a new (M, N) matrix.
Tensor product(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b) {
  Tensor out = Tensor::empty({a.size(trans_a ? 1 : 0), b.size(trans_b ? 0 : 1)}, a.dtype(), a.device());
  gemm_kernels(a.device()).gemm_into(out, a, trans_a, b, trans_b, {}, false);
  return out;
}

void add_scaled(Tensor& dst, const Tensor& src, double alpha) {
  elementwise_kernels(dst.device()).add_scaled_(dst, src, alpha);
}
}  // namespace

void project(const Tensor& a, const Tensor& x, const std::vector<int64_t>* offsets, Tensor& out, Tensor& bias) {
  const GemmKernels& gemm = gemm_kernels(x.device());
  const int64_t C = x.size(2);
  if (offsets) {
    const Tensor x2 = views::view(x, {x.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      Tensor c = views::select(out, 1, static_cast<int64_t>(s));  // (R, C), rows S·C apart
      if (g.length == 0) {
        c.fill_(0.0);
        continue;
      }
      gemm.gemm_into(c, views::slice(a, 1, 0, g.length), false, views::slice(x2, 0, g.start, g.start + g.length),
                     false, {}, false);
    }
  } else {
    const int64_t B = x.size(0), L = x.size(1);
    Tensor c = views::transpose(out, 0, 1);  // (B, R, C): sample b's rows, S·C apart
    gemm.gemm_into(c, views::slice(a, 1, 0, L), false, x, false, {B}, false);
  }
  if (bias.defined()) {
    Tensor column_sums = Tensor::empty({1, C}, x.dtype(), x.device());
    reduce_kernels(x.device()).sum(views::view(x, {x.size(0) * x.size(1), C}), {0}, column_sums);
    bias.copy_(views::view(column_sums, {C}));
  }
}

void expand(const Tensor& a, const Tensor& in, const std::vector<int64_t>* offsets, Tensor& out) {
  const GemmKernels& gemm = gemm_kernels(out.device());
  const int64_t C = out.size(2);
  if (offsets) {
    Tensor out2 = views::view(out, {out.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      if (g.length == 0) continue;
      Tensor c = views::slice(out2, 0, g.start, g.start + g.length);
      gemm.gemm_into(c, views::slice(a, 1, 0, g.length), true, views::select(in, 1, static_cast<int64_t>(s)), false,
                     {}, false);
    }
  } else {
    const int64_t B = out.size(0), L = out.size(1);
    gemm.gemm_into(out, views::slice(a, 1, 0, L), true, views::transpose(in, 0, 1), false, {B}, false);
  }
}

void gram_add(Tensor& acc, const Tensor& t, const std::vector<int64_t>* offsets, bool token_axis, double alpha) {
  const int64_t C = t.size(2);
  if (!token_axis) {
    const Tensor t2 = views::view(t, {t.size(0) * t.size(1), C});
    add_scaled(acc, product(t2, true, t2, false), alpha);
    return;
  }
  if (offsets) {
    const Tensor t2 = views::view(t, {t.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      if (g.length == 0) continue;
      const Tensor seg = views::slice(t2, 0, g.start, g.start + g.length);
      Tensor block = views::slice(views::slice(acc, 0, 0, g.length), 1, 0, g.length);
      add_scaled(block, product(seg, false, seg, true), alpha);
    }
    return;
  }
  const int64_t B = t.size(0), L = t.size(1);
  Tensor sum_b = Tensor::empty({L, L}, t.dtype(), t.device(), MemTag::Workspace);
  gemm_kernels(t.device()).gemm_into(sum_b, t, false, t, true, {B}, false);  // summed over b
  Tensor block = views::slice(views::slice(acc, 0, 0, L), 1, 0, L);
  add_scaled(block, sum_b, alpha);
}

void gram_finish(Tensor& acc, int64_t count) {
  const ElementwiseKernels& ew = elementwise_kernels(acc.device());
  Tensor symmetric = Tensor::empty(acc.shape(), acc.dtype(), acc.device());
  ew.binary(BinaryOp::Add, acc, views::transpose(acc, 0, 1), symmetric);
  ew.scale_(symmetric, 0.5 / static_cast<double>(count));
  acc.copy_(symmetric);
}

Tensor leading_rows(const Tensor& v, int64_t R, double scale) {
  const int64_t n = v.size(0);
  std::vector<int64_t> rows(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) rows[static_cast<size_t>(r)] = n - 1 - r;
  const Tensor index = Tensor::from_vector(rows, {R}).to(v.device());
  // Columns n-1, n-2, ... of v are rows of vᵀ: gather them, then scale.
  const Tensor vt = contiguous(views::transpose(v, 0, 1));
  Tensor out = Tensor::empty({R, n}, v.dtype(), v.device());
  shape_kernels(v.device()).gather_rows(vt, index, out, 1, n, n * static_cast<int64_t>(dtype_size(v.dtype())));
  elementwise_kernels(v.device()).scale_(out, scale);
  return out;
}

}  // namespace lb::backend::generic_lowrank

namespace lb::backend {

namespace {
std::atomic<bool> g_generic_on_cpu{false};
}  // namespace

void set_generic_lowrank_on_cpu(bool on) { g_generic_on_cpu = on; }
bool generic_lowrank_on_cpu() { return g_generic_on_cpu; }

const LowrankKernels kGenericLowrank{generic_lowrank::project, generic_lowrank::expand, generic_lowrank::gram_add,
                                     generic_lowrank::gram_finish, generic_lowrank::leading_rows};

}  // namespace lb::backend
