// Fused multi-head attention (see lb/ops/attention.h): the checks, the geometry and the
// autograd wiring; the kernels are per device (src/backend/attention.h).
//
// Per tile (one batch element, one head), with s = 1/√d, S = s q kᵀ + mask,
// P = softmax_rows(S), Pd = P ⊙ keep / (1-p):
//   forward:  out = Pd v
//   backward: dPd = g vᵀ;  dv = Pdᵀ g;  dP = dPd ⊙ keep / (1-p);
//             dS = P ⊙ (dP - rowsum(dP ⊙ P))   (softmax backward; also the mask's gradient)
//             dq = s dS k;  dk = s dSᵀ q
// P is recomputed in backward from q, k, the mask and the saved row max and 1/sum.
#include <cmath>

#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/ops/attention.h"
#include "lb/ops/reduce.h"
#include "src/backend/attention.h"
#include "src/backend/copy.h"
#include "src/backend/gemm.h"

namespace lb {

namespace {

void check_args(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                const Tensor& mask, double p) {
  const char* op = "attention";
  detail::check_defined(q, op, "q");
  detail::check_defined(k, op, "k");
  detail::check_defined(v, op, "v");
  detail::check_floating(q, op);
  detail::check_same_dtype(q, k, op);
  detail::check_same_dtype(q, v, op);
  detail::check_same_device(q, k, op);
  detail::check_same_device(q, v, op);
  LB_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && k.shape() == v.shape() &&
               q.size(0) == k.size(0) && q.size(2) == k.size(2),
           "attention: q must be (B, Tq, H) and k, v (B, Tk, H), got q ", shape_str(q.shape()),
           ", k ", shape_str(k.shape()), ", v ", shape_str(v.shape()));
  LB_CHECK(heads > 0 && q.size(2) % heads == 0, "attention: hidden size ", q.size(2),
           " is not divisible by the number of heads ", heads);
  LB_CHECK(p >= 0.0 && p <= 1.0, "attention: dropout probability must be in [0, 1], got ", p);
  if (mask.defined()) {
    detail::check_same_device(q, mask, op);
    LB_CHECK(mask.dtype() == q.dtype(), "attention: the additive mask must have q's dtype ",
             dtype_name(q.dtype()), ", got ", dtype_name(mask.dtype()), " ",
             shape_str(mask.shape()), ". HINT: nn::additive_attention_mask(keep, dtype)");
    const Shape full = {q.size(0), heads, q.size(1), k.size(1)};
    bool fits = mask.dim() <= 4;
    for (int64_t i = 1; fits && i <= mask.dim(); ++i)
      fits = mask.size(-i) == 1 || mask.size(-i) == full[4 - i];
    LB_CHECK(fits, "attention: mask ", shape_str(mask.shape()), " does not broadcast to (B, heads, Tq, Tk) = ",
             shape_str(full), ". HINT: a key-padding mask is (B, 1, 1, Tk)");
  }
}

}  // namespace

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                 const Tensor& mask, double dropout_p, bool training, PhiloxStream& rng) {
  check_args(q, k, v, heads, mask, dropout_p);
  backend::AttentionGeom g{};
  g.B = q.size(0);
  g.Tq = q.size(1);
  g.Tk = k.size(1);
  g.H = q.size(2);
  g.heads = heads;
  g.d = g.H / heads;
  g.scale = 1.0 / std::sqrt(static_cast<double>(g.d));
  const bool drop = training && dropout_p > 0;
  g.p = drop ? static_cast<float>(dropout_p) : 0.f;
  g.keep_scale = dropout_p >= 1.0 ? 0.0 : 1.0 / (1.0 - dropout_p);
  const Shape full = {g.B, heads, g.Tq, g.Tk};
  const Tensor mc = mask.defined() ? backend::contiguous(mask) : Tensor();
  if (mc.defined()) g.ms = detail::broadcast_strides(mc, full);
  g.tile_bytes = (g.Tq * g.Tk + 7) / 8;
  g.seed = rng.seed();
  g.subsequence = rng.subsequence();
  g.offset = rng.offset();

  // What backward keeps: q, k, v as given (views of the projections, no copies), or bf16
  // copies under bf16 products, which is all backward uses them in. Where the bf16 GEMM reads
  // bf16 values, the forward products read those copies too (the rounding they would do).
  const bool record = autograd::should_record({q, k, v, mask});
  Tensor kept[3];
  if (record) {
    kept[0] = autograd::keep_product_operand(q);
    kept[1] = autograd::keep_product_operand(k);
    kept[2] = autograd::keep_product_operand(v);
  }
  const bool read_kept = record && backend::gemm_kernels(q.device()).reads_bf16() &&
                         kept[0].dtype() == DType::BF16 && kept[1].dtype() == DType::BF16 &&
                         kept[2].dtype() == DType::BF16;
  const int64_t tiles = g.B * heads;
  const bool empty = g.Tq == 0 || g.Tk == 0 || tiles == 0;
  // Every element is written by one head's GEMM, except when there is nothing to attend to.
  Tensor out = empty ? Tensor::zeros({g.B, g.Tq, g.H}, q.dtype(), q.device())
                     : Tensor::empty({g.B, g.Tq, g.H}, q.dtype(), q.device());
  Tensor stats = Tensor::empty({g.B, heads, g.Tq, 2}, q.dtype(), q.device());
  Tensor bits = drop ? Tensor::empty({tiles * g.tile_bytes}, DType::U8, q.device()) : Tensor();
  if (!empty)
    backend::attention_kernels(q.device())
        .forward(g, read_kept ? kept[0] : q, read_kept ? kept[1] : k, read_kept ? kept[2] : v, mc, out, stats,
                 bits);
  if (drop) {  // the draws used above: one per probability
    PhiloxStream::State st = rng.state();
    st.offset += static_cast<uint64_t>(tiles * g.Tq * g.Tk);
    rng.set_state(st);
  }

  if (record) {
    // Saved: q, k, v (above), the mask, the row stats and the keep bits. The stats and bits
    // are all this op adds to the activation memory.
    autograd::record(
        "attention", out, {q, k, v, mask}, {kept[0], kept[1], kept[2], mc, stats, bits},
        [g, mask_shape = mask.defined() ? mask.shape() : Shape(), full](
            const Tensor& grad, const std::vector<Tensor>& s, const std::vector<bool>& need) {
          const Tensor gc = backend::contiguous(grad);
          // bf16 copies are read as they are where the device's GEMM can, else widened.
          const bool bf16_in = backend::gemm_kernels(gc.device()).reads_bf16() && s[0].dtype() == DType::BF16 &&
                               s[1].dtype() == DType::BF16 && s[2].dtype() == DType::BF16;
          using autograd::saved_f32;
          Tensor dq, dk, dv, dmask;
          if (need[0]) dq = Tensor::empty({g.B, g.Tq, g.H}, gc.dtype(), gc.device());
          if (need[1]) dk = Tensor::empty({g.B, g.Tk, g.H}, gc.dtype(), gc.device());
          if (need[2]) dv = Tensor::empty({g.B, g.Tk, g.H}, gc.dtype(), gc.device());
          if (need[3]) dmask = Tensor::empty(full, gc.dtype(), gc.device());
          if (g.Tq == 0 || g.Tk == 0 || g.B * g.heads == 0) {
            for (Tensor* t : {&dq, &dk, &dv, &dmask})
              if (t->defined()) t->zero_();
          } else {
            backend::attention_kernels(gc.device())
                .backward(g, bf16_in ? s[0] : saved_f32(s[0]), bf16_in ? s[1] : saved_f32(s[1]),
                          bf16_in ? s[2] : saved_f32(s[2]), s[3], s[4], s[5], gc, dq, dk, dv, dmask);
          }
          if (dmask.defined()) dmask = sum_to(dmask, mask_shape);
          return std::vector<Tensor>{dq, dk, dv, dmask};
        });
    // The output again, bit for bit, from what the node keeps: the forward kernel on the
    // operands it read and the same Philox position (the same keep bits). A Linear that
    // consumes the context keeps these instead of it (lb/nn/backward/strategy.cpp); it costs
    // one attention forward in backward. Not where the forward read f32 operands of which
    // only bf16 copies are kept.
    const bool kept_as_read = read_kept || (kept[0].storage() == q.storage() && kept[1].storage() == k.storage() &&
                                            kept[2].storage() == v.storage());
    if (kept_as_read)
      out.grad_fn()->set_output_recipe([g, drop, empty](const std::vector<Tensor>& s) {
        if (empty) return Tensor::zeros({g.B, g.Tq, g.H}, s[0].dtype(), s[0].device());
        Tensor o = Tensor::empty({g.B, g.Tq, g.H}, s[4].dtype(), s[4].device());
        Tensor stats = Tensor::empty(s[4].shape(), s[4].dtype(), s[4].device(), MemTag::Workspace);
        Tensor bits = drop ? Tensor::empty(s[5].shape(), DType::U8, s[5].device(), MemTag::Workspace) : Tensor();
        backend::attention_kernels(o.device()).forward(g, s[0], s[1], s[2], s[3], o, stats, bits);
        return o;
      });
  }
  return out;
}

}  // namespace lb
