// Fused multi-head attention (see lb/ops/attention.h), forward and backward side by side.
// Work is split into B·heads independent tiles (one batch element, one head), handed out to
// threads dynamically (a preempted thread does not hold the others up); a thread takes
// whole tiles and keeps the tile's (Tq, Tk) scores in L2 between the GEMM that makes them,
// the masked softmax and dropout, and the GEMM that consumes them.
//
// Per tile, with s = 1/√d, S = s q kᵀ + mask, P = softmax_rows(S), Pd = P ⊙ keep / (1-p):
//   forward:  out = Pd v
//   backward: dPd = g vᵀ;  dv = Pdᵀ g;  dP = dPd ⊙ keep / (1-p);
//             dS = P ⊙ (dP - rowsum(dP ⊙ P))   (softmax backward; also the mask's gradient)
//             dq = s dS k;  dk = s dSᵀ q
// P is recomputed in backward from q, k, the mask and the saved row max and 1/sum with the
// same arithmetic as the forward, so it is bit-identical to the forward's P.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fast_exp.h"
#include "lb/autograd/node.h"
#include "lb/autograd/saved_operand.h"
#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "lb/ops/attention.h"
#include "lb/ops/reduce.h"
#include "src/cpu/gemm.h"
#include "src/ops/philox_lanes.h"

namespace lb {

namespace {
using detail::contiguous_nograd;
using detail::fast_exp;

// Below this many multiply-adds in all tiles together, one thread does everything.
constexpr double kParallelMacs = 1 << 20;

// q/k/v as BLAS sees them: rows of H contiguous values, `ld` apart, batches `bs` apart.
struct RowsView {
  Tensor t;
  int64_t ld = 0, bs = 0;
};

RowsView rows_view(const Tensor& x) {
  const int64_t T = x.size(1), H = x.size(2);
  const Shape& st = x.strides();
  // BLAS needs unit stride along H and rows that do not overlap.
  if ((H <= 1 || st[2] == 1) && (T <= 1 || st[1] >= H)) return {x, T <= 1 ? H : st[1], st[0]};
  const Tensor c = contiguous_nograd(x);
  return {c, H, T * H};
}

struct Geometry {
  int64_t B, Tq, Tk, H, heads, d;
  double scale;
  float p;             // dropout probability (0: no dropout)
  double keep_scale;   // 1 / (1 - p), 0 when p = 1
  Shape ms;            // mask strides broadcast to (B, heads, Tq, Tk); empty without a mask
  int64_t tile_bytes;  // bytes of keep bits per tile (a tile's bits start on a byte)
  uint64_t seed, subsequence, offset;
};

template <typename T>
const T* mask_row(const Geometry& g, const T* mask, int64_t b, int64_t h, int64_t i) {
  return mask + b * g.ms[0] + h * g.ms[1] + i * g.ms[2];
}

// One probability row in place: z = S + mask (already in `row` as S), then softmax exactly as
// softmax_rows does it. Stores the row max and 1/sum (mx = -inf: fully masked, zeros).
template <typename T>
void softmax_row(T* row, const T* m, int64_t msl, int64_t L, T& mx_out, T& inv_out) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  T mx = kNegInf;
  if (m == nullptr) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < L; ++j) mx = row[j] > mx ? row[j] : mx;
  } else if (msl == 1) {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < L; ++j) {
      const T z = row[j] + m[j];
      row[j] = z;
      mx = z > mx ? z : mx;
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < L; ++j) {
      const T z = row[j] + m[j * msl];
      row[j] = z;
      mx = z > mx ? z : mx;
    }
  }
  // The simd max reduction starts each lane at an implementation-defined "least value":
  // -inf under GCC, lowest() under clang. A row of -inf only must read as fully masked.
  if (!(mx > std::numeric_limits<T>::lowest())) mx = kNegInf;
  if (mx == kNegInf) {
    for (int64_t j = 0; j < L; ++j) row[j] = T(0);
    mx_out = mx;
    inv_out = T(0);
    return;
  }
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < L; ++j) {
    const T e = fast_exp(row[j] - mx);
    row[j] = e;
    s += e;
  }
  const T inv = T(1) / s;
#pragma omp simd
  for (int64_t j = 0; j < L; ++j) row[j] *= inv;
  mx_out = mx;
  inv_out = inv;
}

// The same row from the saved max and 1/sum (bit-identical to softmax_row's result).
template <typename T>
void softmax_row_again(T* row, const T* m, int64_t msl, int64_t L, T mx, T inv) {
  if (mx == -std::numeric_limits<T>::infinity()) {
    for (int64_t j = 0; j < L; ++j) row[j] = T(0);
    return;
  }
  if (m != nullptr) {
#pragma omp simd
    for (int64_t j = 0; j < L; ++j) row[j] = row[j] + m[j * msl];
  }
#pragma omp simd
  for (int64_t j = 0; j < L; ++j) row[j] = fast_exp(row[j] - mx) * inv;
}

// q, k, v's elements: T, or S = uint16_t for bf16 copies the bf16 GEMM reads as they are.
template <typename S>
const S* rows(const RowsView& x) {
  return static_cast<const S*>(x.t.raw_data());
}

// S (Tq, Tk) = scale · q_bh k_bhᵀ for tile (b, h).
template <typename T, typename S>
void scores(const Geometry& g, const RowsView& q, const RowsView& k, int64_t b, int64_t h, T* Sc) {
  cpu::gemm(false, true, g.Tq, g.Tk, g.d, static_cast<T>(g.scale),
            rows<S>(q) + b * q.bs + h * g.d, q.ld, rows<S>(k) + b * k.bs + h * g.d, k.ld,
            T(0), Sc, g.Tk);
}

template <typename T, typename S = T>
void attention_forward(const Geometry& g, const RowsView& q, const RowsView& k, const RowsView& v,
                       const T* mask, T* out, T* stats, uint8_t* bits) {
  const int64_t tiles = g.B * g.heads, Tq = g.Tq, Tk = g.Tk, H = g.H;
  const int64_t msl = g.ms.empty() ? 0 : g.ms[3];
  const double macs = 2.0 * static_cast<double>(tiles) * static_cast<double>(Tq * Tk * g.d);
  const T ks = static_cast<T>(g.keep_scale);
#pragma omp parallel if (macs > kParallelMacs)
  {
    std::vector<T> P(static_cast<size_t>(Tq * Tk));
    std::vector<uint8_t> keep(g.p > 0 ? static_cast<size_t>(Tk) : 0);
#pragma omp for schedule(dynamic)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t b = tile / g.heads, h = tile % g.heads;
      scores<T, S>(g, q, k, b, h, P.data());
      uint8_t* tb = bits ? bits + tile * g.tile_bytes : nullptr;
      if (tb) std::memset(tb, 0, static_cast<size_t>(g.tile_bytes));
      for (int64_t i = 0; i < Tq; ++i) {
        T* row = P.data() + i * Tk;
        T* st = stats + (tile * Tq + i) * 2;
        softmax_row(row, mask ? mask_row(g, mask, b, h, i) : nullptr, msl, Tk, st[0], st[1]);
        if (g.p > 0) {
          // Draws of elements (tile, i, 0..Tk) of the (B, heads, Tq, Tk) probabilities.
          detail::dropout_keep_bytes(g.seed, g.subsequence,
                                     g.offset + static_cast<uint64_t>((tile * Tq + i) * Tk), Tk,
                                     g.p, keep.data());
#pragma omp simd
          for (int64_t j = 0; j < Tk; ++j) row[j] = keep[j] ? row[j] * ks : T(0);
          for (int64_t j = 0; j < Tk; ++j) {
            const int64_t e = i * Tk + j;
            tb[e >> 3] |= static_cast<uint8_t>(keep[j] << (e & 7));
          }
        }
      }
      // out_bh (Tq, d), rows H apart = Pd (Tq, Tk) v_bh (Tk, d).
      cpu::gemm(false, false, Tq, g.d, Tk, T(1), P.data(), Tk, rows<S>(v) + b * v.bs + h * g.d,
                v.ld, T(0), out + b * Tq * H + h * g.d, H);
    }
  }
}

// g (B, Tq, H) contiguous. dq/dk/dv (B, T, H) contiguous or null; dmask (B, heads, Tq, Tk)
// contiguous or null (then summed to the mask's shape by the caller).
template <typename T, typename S = T>
void attention_backward(const Geometry& g, const RowsView& q, const RowsView& k, const RowsView& v,
                        const T* mask, const T* stats, const uint8_t* bits, const T* grad, T* dq,
                        T* dk, T* dv, T* dmask) {
  const int64_t tiles = g.B * g.heads, Tq = g.Tq, Tk = g.Tk, H = g.H;
  const int64_t msl = g.ms.empty() ? 0 : g.ms[3];
  const double macs = 5.0 * static_cast<double>(tiles) * static_cast<double>(Tq * Tk * g.d);
  const T ks = static_cast<T>(g.keep_scale);
  const T scale = static_cast<T>(g.scale);
  const bool need_ds = dq || dk || dmask;
#pragma omp parallel if (macs > kParallelMacs)
  {
    std::vector<T> P(static_cast<size_t>(Tq * Tk)), dP(static_cast<size_t>(Tq * Tk));
    std::vector<T> Pd(bits ? static_cast<size_t>(Tq * Tk) : 0);
#pragma omp for schedule(dynamic)
    for (int64_t tile = 0; tile < tiles; ++tile) {
      const int64_t b = tile / g.heads, h = tile % g.heads;
      const T* g_bh = grad + b * Tq * H + h * g.d;
      const S* v_bh = rows<S>(v) + b * v.bs + h * g.d;
      const uint8_t* tb = bits ? bits + tile * g.tile_bytes : nullptr;
      scores<T, S>(g, q, k, b, h, P.data());
      for (int64_t i = 0; i < Tq; ++i) {
        const T* st = stats + (tile * Tq + i) * 2;
        softmax_row_again(P.data() + i * Tk, mask ? mask_row(g, mask, b, h, i) : nullptr, msl, Tk,
                          st[0], st[1]);
      }
      // The dropped probabilities Pd (what multiplied v), for dv.
      if (tb) {
        for (int64_t e = 0; e < Tq * Tk; ++e) Pd[e] = ((tb[e >> 3] >> (e & 7)) & 1) ? P[e] * ks : T(0);
      }
      if (dv)  // dv_bh (Tk, d) = Pdᵀ (Tk, Tq) g_bh (Tq, d)
        cpu::gemm(true, false, Tk, g.d, Tq, T(1), tb ? Pd.data() : P.data(), Tk, g_bh, H, T(0),
                  dv + b * Tk * H + h * g.d, H);
      if (!need_ds) continue;
      // dPd (Tq, Tk) = g_bh (Tq, d) v_bhᵀ (d, Tk)
      cpu::gemm(false, true, Tq, Tk, g.d, T(1), g_bh, H, v_bh, v.ld, T(0), dP.data(), Tk);
      for (int64_t i = 0; i < Tq; ++i) {
        const T* pr = P.data() + i * Tk;
        T* dr = dP.data() + i * Tk;
        if (tb) {
          for (int64_t j = 0; j < Tk; ++j) {
            const int64_t e = i * Tk + j;
            dr[j] = ((tb[e >> 3] >> (e & 7)) & 1) ? dr[j] * ks : T(0);
          }
        }
        T s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < Tk; ++j) s += dr[j] * pr[j];
#pragma omp simd
        for (int64_t j = 0; j < Tk; ++j) dr[j] = pr[j] * (dr[j] - s);
      }
      if (dmask) std::memcpy(dmask + tile * Tq * Tk, dP.data(), sizeof(T) * Tq * Tk);
      if (dq)  // dq_bh (Tq, d) = s dS (Tq, Tk) k_bh (Tk, d)
        cpu::gemm(false, false, Tq, g.d, Tk, scale, dP.data(), Tk,
                  rows<S>(k) + b * k.bs + h * g.d, k.ld, T(0), dq + b * Tq * H + h * g.d, H);
      if (dk)  // dk_bh (Tk, d) = s dSᵀ (Tk, Tq) q_bh (Tq, d)
        cpu::gemm(true, false, Tk, g.d, Tq, scale, dP.data(), Tk,
                  rows<S>(q) + b * q.bs + h * g.d, q.ld, T(0), dk + b * Tk * H + h * g.d, H);
    }
  }
}

void check_args(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                const Tensor& mask, double p) {
  const char* op = "attention";
  detail::check_defined(q, op, "q");
  detail::check_defined(k, op, "k");
  detail::check_defined(v, op, "v");
  detail::check_cpu(q, op);
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
    detail::check_cpu(mask, op);
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
  Geometry g{};
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
  const Tensor mc = mask.defined() ? contiguous_nograd(mask) : Tensor();
  if (mc.defined()) g.ms = detail::broadcast_strides(mc, full);
  g.tile_bytes = (g.Tq * g.Tk + 7) / 8;
  g.seed = rng.seed();
  g.subsequence = rng.subsequence();
  g.offset = rng.offset();

  const RowsView qv = rows_view(q), kv = rows_view(k), vv = rows_view(v);
  // What backward keeps: q, k, v as given (views of the projections, no copies), or bf16
  // copies under bf16 products, which is all backward uses them in. Where the bf16 GEMM reads
  // bf16 values, the forward products read those copies too (the rounding they would do).
  const bool record = autograd::should_record({q, k, v, mask});
  Tensor kept[3];
  if (record)
    for (int i = 0; i < 3; ++i) kept[i] = autograd::keep_product_operand((i == 0 ? qv : i == 1 ? kv : vv).t);
  const bool read_kept = record && cpu::gemm_reads_bf16() && kept[0].dtype() == DType::BF16 &&
                         kept[1].dtype() == DType::BF16 && kept[2].dtype() == DType::BF16;
  const int64_t tiles = g.B * heads;
  const bool empty = g.Tq == 0 || g.Tk == 0 || tiles == 0;
  // Every element is written by one head's GEMM, except when there is nothing to attend to.
  Tensor out = empty ? Tensor::zeros({g.B, g.Tq, g.H}, q.dtype(), q.device())
                     : Tensor::empty({g.B, g.Tq, g.H}, q.dtype(), q.device());
  Tensor stats = Tensor::empty({g.B, heads, g.Tq, 2}, q.dtype(), q.device());
  Tensor bits = drop ? Tensor::empty({tiles * g.tile_bytes}, DType::U8, q.device()) : Tensor();
  if (!empty && read_kept) {
    attention_forward<float, uint16_t>(g, rows_view(kept[0]), rows_view(kept[1]), rows_view(kept[2]),
                                       mc.defined() ? mc.data<float>() : nullptr, out.data<float>(),
                                       stats.data<float>(), drop ? bits.data<uint8_t>() : nullptr);
  } else if (!empty) {
    detail::dispatch_float(q.dtype(), "attention", [&](auto tag) {
      using T = decltype(tag);
      attention_forward<T>(g, qv, kv, vv, mc.defined() ? mc.data<T>() : nullptr, out.data<T>(),
                           stats.data<T>(), drop ? bits.data<uint8_t>() : nullptr);
    });
  }
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
          const Tensor gc = contiguous_nograd(grad);
          // bf16 copies are read as they are where the bf16 GEMM can, else widened.
          const bool bf16_in = cpu::gemm_reads_bf16() && s[0].dtype() == DType::BF16 &&
                               s[1].dtype() == DType::BF16 && s[2].dtype() == DType::BF16;
          using autograd::saved_f32;
          const RowsView qs = rows_view(bf16_in ? s[0] : saved_f32(s[0])),
                         ks = rows_view(bf16_in ? s[1] : saved_f32(s[1])),
                         vs = rows_view(bf16_in ? s[2] : saved_f32(s[2]));
          Tensor dq, dk, dv, dmask;
          if (need[0]) dq = Tensor::empty({g.B, g.Tq, g.H}, gc.dtype(), gc.device());
          if (need[1]) dk = Tensor::empty({g.B, g.Tk, g.H}, gc.dtype(), gc.device());
          if (need[2]) dv = Tensor::empty({g.B, g.Tk, g.H}, gc.dtype(), gc.device());
          if (need[3]) dmask = Tensor::empty(full, gc.dtype(), gc.device());
          const bool empty = g.Tq == 0 || g.Tk == 0 || g.B * g.heads == 0;
          if (empty) {
            for (Tensor* t : {&dq, &dk, &dv, &dmask})
              if (t->defined()) t->zero_();
          } else if (bf16_in) {
            auto ptr = [](Tensor& t) { return t.defined() ? t.data<float>() : nullptr; };
            attention_backward<float, uint16_t>(
                g, qs, ks, vs, s[3].defined() ? s[3].data<float>() : nullptr, s[4].data<float>(),
                s[5].defined() ? s[5].data<uint8_t>() : nullptr, gc.data<float>(), ptr(dq), ptr(dk),
                ptr(dv), ptr(dmask));
          } else {
            detail::dispatch_float(gc.dtype(), "attention backward", [&](auto tag) {
              using T = decltype(tag);
              auto ptr = [](Tensor& t) { return t.defined() ? t.data<T>() : nullptr; };
              attention_backward<T>(g, qs, ks, vs, s[3].defined() ? s[3].data<T>() : nullptr,
                                    s[4].data<T>(), s[5].defined() ? s[5].data<uint8_t>() : nullptr,
                                    gc.data<T>(), ptr(dq), ptr(dk), ptr(dv), ptr(dmask));
            });
          }
          if (dmask.defined()) dmask = sum_to(dmask, mask_shape);
          return std::vector<Tensor>{dq, dk, dv, dmask};
        });
  }
  return out;
}

}  // namespace lb
