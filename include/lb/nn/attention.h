// Multi-head self-attention: query/key/value projections (children named "query", "key",
// "value" as in Hugging Face BERT/ViT) and scaled dot-product attention with an additive mask.
// The output projection belongs to the model (its name differs between BERT and ViT).
#pragma once
#include "lb/nn/layers.h"
#include "lb/nn/token_packing.h"

namespace lb::nn {

// q, k, v (B, T, H) with H = heads·d -> context (B, T, H).
// softmax(q kᵀ / √d + mask) v per head; mask is additive, broadcast to (B, heads, T, T)
// (e.g. (B, 1, 1, T)), or undefined. Dropout on the probabilities when training.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    int64_t heads, const Tensor& mask, double dropout_p,
                                    bool training);

// (B, T) 1 = keep / 0 = pad -> additive (B, 1, 1, T) mask: 0 or the dtype's lowest value.
Tensor additive_attention_mask(const Tensor& keep_mask, DType dtype);

class SelfAttention : public Module {
 public:
  SelfAttention(int64_t hidden, int64_t heads, double attention_dropout = 0.0, bool bias = true);
  std::string type_name() const override { return "SelfAttention"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x, const Tensor& mask = Tensor());
  // x (1, N, hidden) packed by `packing`: the projections run on the N kept tokens, the
  // attention on the padded layout under `mask` (B, 1, 1, T); returns (1, N, hidden).
  Tensor forward_packed(const Tensor& x, const Tensor& mask, const TokenPacking& packing);

 private:
  int64_t hidden_, heads_;
  double dropout_p_;
  std::shared_ptr<Linear> query_, key_, value_;
};

}  // namespace lb::nn
