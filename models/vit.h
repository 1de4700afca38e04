// ViT for image classification in the Hugging Face ViTForImageClassification layout:
// patch-embedding conv, CLS token, learned position embeddings, pre-LN encoder blocks, final
// LayerNorm, linear head on the CLS token. Any image / patch size (image divisible by patch).
#pragma once
#include <nlohmann/json.hpp>

#include "lb/nn/attention.h"
#include "lb/nn/recomputable_block.h"
#include "models/encoder_config.h"

namespace lb::models {

struct ViTConfig : EncoderConfig {  // ViT-base/16 at 224 by default
  ViTConfig() {  // Hugging Face's ViTConfig defaults where they differ from BERT's
    hidden_dropout_prob = 0.0;
    attention_probs_dropout_prob = 0.0;
    num_labels = 1000;
  }
  int64_t image_size = 224;
  int64_t patch_size = 16;
  int64_t num_channels = 3;
  bool qkv_bias = true;
  static ViTConfig from_json(const nlohmann::json& j, const std::string& path);
  nlohmann::json to_json() const;
  int64_t num_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};

class ViTLayer : public nn::RecomputableBlock {
 public:
  explicit ViTLayer(const ViTConfig& c);
  std::string type_name() const override { return "ViTLayer"; }
  Tensor forward(const Tensor& x);

 private:
  Tensor layer(const Tensor& x);
  std::shared_ptr<nn::LayerNorm> norm_before_, norm_after_;
  std::shared_ptr<nn::SelfAttention> attn_;
  std::shared_ptr<nn::Linear> attn_out_, intermediate_, out_;
  std::shared_ptr<nn::Dropout> dropout_;
  nn::Activation act_;
};

class ViTForImageClassification : public nn::Module {
 public:
  explicit ViTForImageClassification(const ViTConfig& c);
  std::string type_name() const override { return "ViTForImageClassification"; }
  // pixels (B, C, H, W) float; labels (B) i64 or undefined. Returns logits (B, num_labels)
  // and, with labels, the mean cross-entropy (label_smoothing as given).
  struct Output {
    Tensor logits, loss;
  };
  Output forward(const Tensor& pixels, const Tensor& labels = Tensor(), double label_smoothing = 0.0);
  const ViTConfig& config() const { return config_; }

 private:
  ViTConfig config_;
  Tensor cls_token_, position_embeddings_;
  std::shared_ptr<nn::Conv2d> patch_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<nn::LayerNorm> final_norm_;
  std::shared_ptr<nn::Linear> classifier_;
  std::shared_ptr<nn::Dropout> dropout_;
};

}  // namespace lb::models
