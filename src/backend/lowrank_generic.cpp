// INSTANT's low-rank kernels written with tensor views and the device's GEMM table
// (src/backend/lowrank.h): every projection is one batched GEMM whose output is a view of
// the (R, S, C) buffer — no copies — or, for padding-free sequences of different lengths,
// one GEMM per sequence. The CUDA table uses these; the CPU tests run them against the CPU
// kernels.
#include <atomic>
#include <vector>

#include "lb/autograd/grad_mode.h"
#include "lb/ops/elementwise.h"
#include "lb/ops/linalg.h"
#include "lb/ops/reduce.h"
#include "lb/ops/shape_ops.h"
#include "src/backend/gemm.h"
#include "src/backend/lowrank.h"

namespace lb::backend::generic_lowrank {

namespace {
// Sequence s of a padding-free call: rows offsets[s] .. offsets[s+1].
struct Segment {
  int64_t start, length;
};
Segment segment(const std::vector<int64_t>& offsets, size_t s) {
  return {offsets[s], offsets[s + 1] - offsets[s]};
}
}  // namespace

void project(const Tensor& a, const Tensor& x, const std::vector<int64_t>* offsets, Tensor& out, Tensor& bias) {
  NoGradGuard no_grad;
  const GemmKernels& gemm = gemm_kernels(x.device());
  const int64_t C = x.size(2);
  if (offsets) {
    const Tensor x2 = x.view({x.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      Tensor c = out.select(1, static_cast<int64_t>(s));  // (R, C), rows S·C apart
      if (g.length == 0) {
        c.fill_(0.0);
        continue;
      }
      gemm.gemm_into(c, a.slice(1, 0, g.length), false, x2.slice(0, g.start, g.start + g.length), false, {},
                     false);
    }
  } else {
    const int64_t B = x.size(0), L = x.size(1);
    Tensor c = out.transpose(0, 1);  // (B, R, C): sample b's rows, S·C apart
    gemm.gemm_into(c, a.slice(1, 0, L), false, x, false, {B}, false);
  }
  if (bias.defined()) bias.copy_(sum(x.view({x.size(0) * x.size(1), C}), {0}));
}

void expand(const Tensor& a, const Tensor& in, const std::vector<int64_t>* offsets, Tensor& out) {
  NoGradGuard no_grad;
  const GemmKernels& gemm = gemm_kernels(out.device());
  const int64_t C = out.size(2);
  if (offsets) {
    Tensor out2 = out.view({out.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      if (g.length == 0) continue;
      Tensor c = out2.slice(0, g.start, g.start + g.length);
      gemm.gemm_into(c, a.slice(1, 0, g.length), true, in.select(1, static_cast<int64_t>(s)), false, {}, false);
    }
  } else {
    const int64_t B = out.size(0), L = out.size(1);
    gemm.gemm_into(out, a.slice(1, 0, L), true, in.transpose(0, 1), false, {B}, false);
  }
}

void gram_add(Tensor& acc, const Tensor& t, const std::vector<int64_t>* offsets, bool token_axis, double alpha) {
  NoGradGuard no_grad;
  const int64_t C = t.size(2);
  if (!token_axis) {
    const Tensor t2 = t.view({t.size(0) * t.size(1), C});
    add_(acc, matmul(t2, t2, true, false), alpha);
    return;
  }
  if (offsets) {
    const Tensor t2 = t.view({t.size(1), C});
    for (size_t s = 0; s + 1 < offsets->size(); ++s) {
      const Segment g = segment(*offsets, s);
      if (g.length == 0) continue;
      const Tensor seg = t2.slice(0, g.start, g.start + g.length);
      Tensor block = acc.slice(0, 0, g.length).slice(1, 0, g.length);
      add_(block, matmul(seg, seg, false, true), alpha);
    }
    return;
  }
  const int64_t B = t.size(0), L = t.size(1);
  Tensor sum_b = Tensor::empty({L, L}, t.dtype(), t.device(), MemTag::Workspace);
  gemm_kernels(t.device()).gemm_into(sum_b, t, false, t, true, {B}, false);  // summed over b
  Tensor block = acc.slice(0, 0, L).slice(1, 0, L);
  add_(block, sum_b, alpha);
}

void gram_finish(Tensor& acc, int64_t count) {
  NoGradGuard no_grad;
  const Tensor symmetric = add(acc, acc.transpose(0, 1));
  acc.copy_(mul_scalar(symmetric, 0.5 / static_cast<double>(count)));
}

Tensor leading_rows(const Tensor& v, int64_t R, double scale) {
  NoGradGuard no_grad;
  const int64_t n = v.size(0);
  std::vector<int64_t> cols(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) cols[static_cast<size_t>(r)] = n - 1 - r;
  const Tensor index = Tensor::from_vector(cols, {R}).to(v.device());
  return mul_scalar(index_select(v, 1, index).transpose(0, 1).contiguous(), scale);
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
