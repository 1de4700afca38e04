// The settings a BERT and a ViT encoder share, under Hugging Face's config.json names, read
// and written one way for both (BertConfig and ViTConfig extend it).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace lb::models {

struct EncoderConfig {
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";
  double layer_norm_eps = 1e-12;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double initializer_range = 0.02;
  int64_t num_labels = 2;

  // Reads the shared keys of a config.json object (absent keys keep the current values);
  // wrong types, out-of-range values and a hidden_size that the heads do not divide are
  // errors naming `path`.key.
  void read_encoder(const nlohmann::json& j, const std::string& path);
  // Writes them into `j`.
  void write_encoder(nlohmann::json& j) const;
};

}  // namespace lb::models
