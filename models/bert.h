// BERT for sequence classification / regression in the Hugging Face
// BertForSequenceClassification layout (parameter names equal its state_dict keys):
// embeddings (word + position + token type, LayerNorm), post-LN encoder, tanh pooler on the
// first token, classifier. num_labels = 1 means regression (MSE), else cross-entropy.
#pragma once
#include <optional>

#include <nlohmann/json.hpp>

#include "lb/nn/attention.h"
#include "lb/nn/recomputable_block.h"
#include "models/encoder_config.h"

namespace lb::models {

struct BertConfig : EncoderConfig {  // BERT-base's sizes by default
  int64_t vocab_size = 30522;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  std::optional<double> classifier_dropout;  // the head's dropout; unset: hidden_dropout_prob (as HF)
  // Reads a Hugging Face config.json object; unknown keys are ignored (HF configs carry
  // many), wrong types and out-of-range values are errors naming `path`.key, and so are
  // settings that change the maths in ways not implemented (position_embedding_type other
  // than "absolute", is_decoder, add_cross_attention, model_type other than "bert", a
  // multi-label problem_type) and sizes whose parameters would not fit in memory.
  static BertConfig from_json(const nlohmann::json& j, const std::string& path);
  nlohmann::json to_json() const;
};

class BertEmbeddings : public nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& c);
  std::string type_name() const override { return "BertEmbeddings"; }
  // input_ids and token_type_ids (B, T), positions 0..T-1; or, packed, all three (1, N)
  // with each token's position given.
  Tensor forward(const Tensor& input_ids, const Tensor& token_type_ids,
                 const Tensor& position_ids = Tensor());

 private:
  std::shared_ptr<nn::Embedding> word_, position_, token_type_;
  std::shared_ptr<nn::LayerNorm> norm_;
  std::shared_ptr<nn::Dropout> dropout_;
};

class BertLayer : public nn::RecomputableBlock {
 public:
  explicit BertLayer(const BertConfig& c);
  std::string type_name() const override { return "BertLayer"; }
  // x (B, T, H) with the additive mask, or x (1, N, H) packed by `packing` (the mask then
  // is its key-padding mask).
  Tensor forward(const Tensor& x, const Tensor& mask, const nn::TokenPacking* packing = nullptr);

 private:
  Tensor layer(const Tensor& x, const Tensor& mask, const nn::TokenPacking* packing);
  std::shared_ptr<nn::SelfAttention> self_;
  std::shared_ptr<nn::Linear> attn_out_, intermediate_, out_;
  std::shared_ptr<nn::LayerNorm> attn_norm_, out_norm_;
  std::shared_ptr<nn::Dropout> dropout_;
  nn::Activation act_;
};

struct SequenceClassifierOutput {
  Tensor logits;  // (B, num_labels)
  Tensor loss;    // scalar when labels were given
};

class BertForSequenceClassification : public nn::Module {
 public:
  explicit BertForSequenceClassification(const BertConfig& c);
  std::string type_name() const override { return "BertForSequenceClassification"; }
  // input_ids (B, T) i64; token_type_ids (B, T) or undefined (zeros); attention_mask (B, T)
  // 1/0 or undefined (all kept); labels (B) i64 for classification, (B) float for regression.
  SequenceClassifierOutput forward(const Tensor& input_ids, const Tensor& token_type_ids,
                                   const Tensor& attention_mask, const Tensor& labels = Tensor());
  const BertConfig& config() const { return config_; }
  // Padding-free execution (lb/nn/token_packing.h): batches with padding run the token-wise
  // layers on their kept tokens only. Same results on kept tokens; off by default, because
  // INSTANT's token-axis projections need the padded (B, T) layout.
  void set_skip_padding(bool on) { skip_padding_ = on; }
  bool skip_padding() const { return skip_padding_; }

 private:
  BertConfig config_;
  bool skip_padding_ = false;
  std::shared_ptr<BertEmbeddings> embeddings_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<nn::Linear> pooler_, classifier_;
  std::shared_ptr<nn::Dropout> dropout_;
};

}  // namespace lb::models
