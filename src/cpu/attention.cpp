// CPU fused multi-head attention kernels (src/backend/attention.h), forward and backward
// side by side.
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

#include "lb/core/checks.h"
#include "lb/core/dispatch.h"
#include "src/backend/attention.h"
#include "src/backend/copy.h"
#include "src/backend/fast_exp.h"
#include "src/cpu/gemm.h"
#include "src/cpu/philox_lanes.h"
#include "src/cpu/softmax_row.h"

namespace lb::backend {

namespace {
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
  const Tensor c = backend::contiguous(x);
  return {c, H, T * H};
}

using Geometry = AttentionGeom;

template <typename T>
const T* mask_row(const Geometry& g, const T* mask, int64_t b, int64_t h, int64_t i) {
  return mask + b * g.ms[0] + h * g.ms[1] + i * g.ms[2];
}

// One probability row in place: z = S + mask (already in `row` as S), then softmax exactly as
// softmax_rows does it. Stores the row max and 1/sum (mx = -inf: fully masked, zeros).
template <typename T>
void softmax_row(T* row, const T* m, int64_t msl, int64_t L, T& mx_out, T& inv_out) {
  mx_out = cpu::masked_row_max(row, m, msl, L, row);
  if (mx_out == -std::numeric_limits<T>::infinity()) {
    for (int64_t j = 0; j < L; ++j) row[j] = T(0);
    inv_out = T(0);
    return;
  }
  inv_out = cpu::exp_normalize_row(row, L, mx_out);
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
          // A product, not a select, so it vectorizes: probabilities are finite and >= 0, so
          // p · (1 · ks) = p · ks and p · 0 = +0 exactly.
          for (int64_t j = 0; j < Tk; ++j) row[j] *= static_cast<T>(keep[j]) * ks;
          detail::or_keep_bits(tb, i * Tk, keep.data(), Tk);
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
    std::vector<uint8_t> keep(bits ? static_cast<size_t>(Tq * Tk) : 0);  // the tile's bits as bytes
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
        detail::unpack_keep_bits(tb, 0, Tq * Tk, keep.data());
#pragma omp simd
        for (int64_t e = 0; e < Tq * Tk; ++e) {
          const T kept = P[e] * ks;
          Pd[e] = keep[e] ? kept : T(0);
        }
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
          const uint8_t* kr = keep.data() + i * Tk;
#pragma omp simd
          for (int64_t j = 0; j < Tk; ++j) {
            const T kept = dr[j] * ks;
            dr[j] = kr[j] ? kept : T(0);
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

template <typename F>
void dispatch_operands(const Tensor& q, DType dt, const char* what, F&& f) {
  if (q.dtype() == DType::BF16) f(float{}, uint16_t{});  // bf16 copies read as they are
  else detail::dispatch_float(dt, what, [&](auto tag) { f(tag, tag); });
}

void forward(const Geometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, Tensor& out,
             Tensor& stats, Tensor& bits) {
  dispatch_operands(q, out.dtype(), "attention", [&](auto tag, auto stag) {
    using T = decltype(tag);
    using S = decltype(stag);
    attention_forward<T, S>(g, rows_view(q), rows_view(k), rows_view(v), data_or_null<T>(mask), out.data<T>(),
                            stats.data<T>(), data_or_null<uint8_t>(bits));
  });
}

void backward(const Geometry& g, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask,
              const Tensor& stats, const Tensor& bits, const Tensor& grad, Tensor& dq, Tensor& dk, Tensor& dv,
              Tensor& dmask) {
  dispatch_operands(q, grad.dtype(), "attention backward", [&](auto tag, auto stag) {
    using T = decltype(tag);
    using S = decltype(stag);
    attention_backward<T, S>(g, rows_view(q), rows_view(k), rows_view(v), data_or_null<T>(mask), stats.data<T>(),
                             data_or_null<uint8_t>(bits), grad.data<T>(), data_or_null<T>(dq), data_or_null<T>(dk),
                             data_or_null<T>(dv), data_or_null<T>(dmask));
  });
}

}  // namespace

const AttentionKernels kCpuAttention{forward, backward};

}  // namespace lb::backend
