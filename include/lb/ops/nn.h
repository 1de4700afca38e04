// Neural-network ops: normalisations, softmax, embedding, dropout, losses. Differentiable for
// f32/f64; semantics follow the PyTorch functional op of the same name.
#pragma once
#include <cstdint>

#include "lb/core/philox.h"
#include "lb/core/tensor.h"

namespace lb {

// Softmax along `dim`. `mask` (optional) is additive and broadcast to x (e.g. 0 / -1e4 or
// -inf for padded keys, the Hugging Face convention): softmax(x + mask). The mask has x's
// dtype and is differentiable (a learned bias may be passed). -inf entries get probability
// exactly 0; a row whose entries are all -inf gives 0 (log_softmax: -inf) with zero gradient
// instead of PyTorch's NaN. Only the output is saved for backward.
Tensor softmax(const Tensor& x, int64_t dim, const Tensor& mask = Tensor());
Tensor log_softmax(const Tensor& x, int64_t dim, const Tensor& mask = Tensor());

// Layer norm over the last dim (size of weight/bias). weight/bias may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);

// Batch norm over (N, C, ...) per channel C. In training mode uses batch statistics and
// updates running_mean/var in place (unbiased var, PyTorch's momentum convention); in eval
// mode uses the running statistics. running_* may be undefined (then training stats only).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  Tensor running_mean, Tensor running_var, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// Gather rows of `weight` (V, D) by integer `indices` (any shape, i32/i64) -> (..., D).
// Backward scatter-adds into weight's gradient. padding_idx rows get no gradient (-1 = none).
Tensor embedding(const Tensor& indices, const Tensor& weight, int64_t padding_idx = -1);

// Inverted dropout with a Philox stream: keep with prob 1-p, scale by 1/(1-p). Element i
// (row-major) takes draw rng.offset() + i and is kept iff philox_uniform(draw) > float(p);
// the stream advances by numel(x). Eval mode or p = 0 returns x and draws nothing. The mask
// is saved bit-packed (numel/8 bytes).
Tensor dropout(const Tensor& x, double p, bool training, PhiloxStream& rng);
// dropout(x, p, training, rng) wᵀ as one op (LoRA's down-projection): the same mask and
// numbers, but it keeps x (or what x's producer keeps to give it back) and the mask, not the
// dropped-out copy, so adapters on one input keep it once (src/ops/dropout_linear.cpp).
Tensor dropout_linear(const Tensor& x, const Tensor& w, double p, bool training, PhiloxStream& rng);

// Mean cross-entropy of logits (N, C) against i64 targets (N). Targets equal to
// ignore_index contribute nothing (mean over the rest). label_smoothing as in PyTorch
// (>= 1.13). Targets may also be i32. All targets ignored: loss 0 and zero gradient
// (PyTorch: NaN). Saves the logits, one log-sum-exp per row and the targets.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
// Mean squared error, mean over all elements.
Tensor mse_loss(const Tensor& input, const Tensor& target);

}  // namespace lb
