// Fused multi-head scaled dot-product attention (Vaswani et al. 2017, §3.2) on the
// (B, T, heads·d) layout the Q/K/V projections produce, forward and backward.
#pragma once
#include "lb/core/philox.h"
#include "lb/core/tensor.h"

namespace lb {

// q (B, Tq, H), k and v (B, Tk, H), H = heads·d  ->  context (B, Tq, H):
//   P_bh = softmax(q_bh k_bhᵀ / √d + mask_bh)          (Tq, Tk) per batch b and head h
//   out_bh = dropout(P_bh) v_bh                          head h = columns h·d .. (h+1)·d
// mask: additive, broadcastable to (B, heads, Tq, Tk) (a key-padding mask is (B, 1, 1, Tk)),
// in q's dtype, or undefined; it may require grad. Dropout (training and dropout_p > 0)
// follows dropout()'s convention on the (B, heads, Tq, Tk) probability tensor: element e of
// it takes draw rng.offset() + e and the stream advances by B·heads·Tq·Tk draws, so the result
// equals softmax + dropout + matmul composed from the separate ops with the same stream.
// Rows whose mask is -inf everywhere get zero probabilities and zero gradient (as softmax).
//
// No (B, heads, T, d) copies: the per-head GEMMs read q, k, v and write the context in place
// through leading dimensions. Saved for backward: q, k, v (views, no copies), the mask, two
// numbers per probability row (its max and 1/sum) and the dropout keep bits; the (Tq, Tk)
// probabilities are recomputed per head in backward (one extra small GEMM), never stored.
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads,
                 const Tensor& mask, double dropout_p, bool training, PhiloxStream& rng);

}  // namespace lb
