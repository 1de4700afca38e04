// Scaled dot-product self-attention (Vaswani et al. 2017, §3.2), Hugging Face layout.
#include "lb/nn/attention.h"

#include <limits>

#include "lb/autograd/module_scope.h"
#include "lb/core/random.h"

namespace lb::nn {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    int64_t heads, const Tensor& mask, double dropout_p,
                                    bool training) {
  // The fused op (lb/ops/attention.h): per-head GEMMs on the (B, T, H) layout, no permute
  // copies, probabilities recomputed in backward instead of saved.
  return attention(q, k, v, heads, mask, dropout_p, training, default_generator());
}

Tensor additive_attention_mask(const Tensor& keep_mask, DType dtype) {
  LB_CHECK(keep_mask.dim() == 2, "attention mask must be (B, T), got ", shape_str(keep_mask.shape()));
  const int64_t B = keep_mask.size(0), T = keep_mask.size(1);
  const auto keep = keep_mask.to(Device::cpu()).to_double_vector();
  const double lowest = dtype == DType::F64 ? std::numeric_limits<double>::lowest()
                                            : std::numeric_limits<float>::lowest();
  std::vector<double> m(keep.size());
  for (size_t i = 0; i < keep.size(); ++i) m[i] = keep[i] != 0 ? 0.0 : lowest;
  return Tensor::from_vector<double>(m, {B, 1, 1, T}).to(dtype).to(keep_mask.device());
}

SelfAttention::SelfAttention(int64_t hidden, int64_t heads, double attention_dropout, bool bias)
    : hidden_(hidden), heads_(heads), dropout_p_(attention_dropout) {
  LB_CHECK(heads > 0 && hidden % heads == 0, "SelfAttention: hidden size ", hidden,
           " is not divisible by heads ", heads);
  query_ = register_module("query", std::make_shared<Linear>(hidden, hidden, bias));
  key_ = register_module("key", std::make_shared<Linear>(hidden, hidden, bias));
  value_ = register_module("value", std::make_shared<Linear>(hidden, hidden, bias));
}

std::string SelfAttention::extra_repr() const {
  return std::to_string(hidden_) + ", heads " + std::to_string(heads_);
}

// query, key and value read the same x: their calls share it (CallContext::shared), so a
// strategy that keeps a projection of x keeps it once for the three.
Tensor SelfAttention::forward(const Tensor& x, const Tensor& mask) {
  const autograd::ModuleScope scope(path());
  const backward::CallContext call{nullptr, std::make_shared<backward::SharedInput>()};
  return scaled_dot_product_attention(query_->forward(x, call), key_->forward(x, call), value_->forward(x, call),
                                      heads_, mask, dropout_p_, is_training());
}

Tensor SelfAttention::forward_packed(const Tensor& x, const Tensor& mask, const TokenPacking& packing) {
  const autograd::ModuleScope scope(path());
  const backward::CallContext call{packing.sequence_offsets(), std::make_shared<backward::SharedInput>()};
  const Tensor ctx = scaled_dot_product_attention(
      packing.unpack(query_->forward(x, call)), packing.unpack(key_->forward(x, call)),
      packing.unpack(value_->forward(x, call)), heads_, mask, dropout_p_, is_training());
  return packing.pack(ctx);
}

}  // namespace lb::nn
