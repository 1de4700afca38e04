// bf16 storage of saved activations under bf16 products (train.precision "bf16").
//
// Under MatmulPrecision::BF16 (lb/core/precision.h) every f32 product rounds its operands to
// bf16. A saved tensor whose only use in backward is as such an operand (a Linear's input for
// g_w = g_yᵀ x, a matmul's operands, attention's q, k, v, an im2col convolution's input) can
// therefore be kept as bf16 with no change to any gradient, bit for bit, at half the bytes on
// the tape (autograd::saved_bytes counts the bf16 storage): keep_product_operand.
//
// keep_rounded_activation is the approximate case, used where a derivative is evaluated at
// the saved value and is smooth there: GELU's input, whose bf16 rounding (≤ 2⁻⁸|x|) moves
// gelu'(x) by at most 0.34·2⁻⁸ ≈ 1.3e-3. A Winograd convolution's input, kept through
// keep_product_operand, is the other one: its products see transformed tiles, so the input's
// rounding is one rounding more (≤ 2⁻⁸ relative per element). torch.autocast keeps both in
// bf16. LayerNorm inputs (cancellation in x - mean), softmax outputs and dropout masks are
// kept as they are.
#pragma once
#include "lb/core/tensor.h"

namespace lb::autograd {

// x as bf16 when the matmul precision is BF16 and x is an f32 activation on the CPU; x itself
// otherwise (parameters and buffers are resident anyway). Consecutive calls on the same tensor
// while the first copy is still held (a Linear input shared by the query, key and value
// projections) return that one copy, so it is kept and counted once.
Tensor keep_product_operand(const Tensor& x);
// The same storage rule for a tensor whose backward use is not a product (see above).
Tensor keep_rounded_activation(const Tensor& x);

// On by default; off keeps every saved tensor f32 (tests compare the two, bit for bit where
// exact). Process-wide.
bool bf16_saving();
void set_bf16_saving(bool on);
class Bf16SavingScope {
 public:
  explicit Bf16SavingScope(bool on) : old_(bf16_saving()) { set_bf16_saving(on); }
  ~Bf16SavingScope() { set_bf16_saving(old_); }
  Bf16SavingScope(const Bf16SavingScope&) = delete;
  Bf16SavingScope& operator=(const Bf16SavingScope&) = delete;

 private:
  bool old_;
};

// The f32 tensor again from what either returned (exact: bf16 values are f32 values); any
// other tensor is returned as is.
Tensor saved_f32(const Tensor& saved);

}  // namespace lb::autograd
