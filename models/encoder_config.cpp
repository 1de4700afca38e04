// EncoderConfig (see encoder_config.h).
#include "models/encoder_config.h"

#include "models/hf_config.h"

namespace lb::models {

void EncoderConfig::read_encoder(const nlohmann::json& j, const std::string& path) {
  hidden_size = hf::get_int(j, path, "hidden_size", hidden_size, 1);
  num_hidden_layers = hf::get_int(j, path, "num_hidden_layers", num_hidden_layers, 0);
  num_attention_heads = hf::get_int(j, path, "num_attention_heads", num_attention_heads, 1);
  intermediate_size = hf::get_int(j, path, "intermediate_size", intermediate_size, 1);
  num_labels = hf::get_num_labels(j, path, num_labels);
  hidden_act = hf::get_activation(j, path, hidden_act);
  layer_norm_eps = hf::get_num(j, path, "layer_norm_eps", layer_norm_eps, 0.0, 1.0);
  hidden_dropout_prob = hf::get_num(j, path, "hidden_dropout_prob", hidden_dropout_prob, 0.0, 0.999);
  attention_probs_dropout_prob =
      hf::get_num(j, path, "attention_probs_dropout_prob", attention_probs_dropout_prob, 0.0, 0.999);
  initializer_range = hf::get_num(j, path, "initializer_range", initializer_range, 0.0, 10.0);
  LB_CHECK(hidden_size % num_attention_heads == 0, path, ": hidden_size ", hidden_size,
           " is not divisible by num_attention_heads ", num_attention_heads);
}

void EncoderConfig::write_encoder(nlohmann::json& j) const {
  j["hidden_size"] = hidden_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["intermediate_size"] = intermediate_size;
  j["hidden_act"] = hidden_act;
  j["layer_norm_eps"] = layer_norm_eps;
  j["hidden_dropout_prob"] = hidden_dropout_prob;
  j["attention_probs_dropout_prob"] = attention_probs_dropout_prob;
  j["initializer_range"] = initializer_range;
  j["num_labels"] = num_labels;
}

}  // namespace lb::models
