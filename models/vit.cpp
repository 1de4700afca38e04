// ViT (Dosovitskiy et al. 2021; Hugging Face modeling_vit.py layout).
#include "models/vit.h"

#include "lb/autograd/module_scope.h"
#include "lb/autograd/recompute.h"
#include "lb/nn/init.h"
#include "models/hf_config.h"
#include "models/model_size.h"

namespace lb::models {

namespace {
// The parameters ViTForImageClassification(c) allocates, counted before it does (the patch
// count in checked arithmetic: image_size 2^40 would wrap num_patches()).
ParamCount parameter_count(const ViTConfig& c) {
  const int64_t h = c.hidden_size, i = c.intermediate_size, g = c.image_size / c.patch_size;
  ParamCount layer;
  layer.add({4, h, h}).add({c.qkv_bias ? 3 : 0, h}).add({h}).add({h, i}).add({i}).add({i, h}).add({h}).add({4, h});
  ParamCount n;
  n.add({c.num_channels, h, c.patch_size, c.patch_size}).add({h}).add({h}).add({g, g, h}).add({h});
  n.add_times(layer, c.num_hidden_layers);
  n.add({2, h}).add({h, c.num_labels}).add({c.num_labels});
  return n;
}

std::string sizes_of(const ViTConfig& c) {
  return "image_size " + std::to_string(c.image_size) + ", patch_size " + std::to_string(c.patch_size) +
         ", num_channels " + std::to_string(c.num_channels) + ", hidden_size " + std::to_string(c.hidden_size) +
         ", num_hidden_layers " + std::to_string(c.num_hidden_layers) + ", intermediate_size " +
         std::to_string(c.intermediate_size) + ", num_labels " + std::to_string(c.num_labels);
}
}  // namespace

ViTConfig ViTConfig::from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected a JSON object");
  ViTConfig c;
  c.image_size = hf::get_int(j, path, "image_size", c.image_size, 1);
  c.patch_size = hf::get_int(j, path, "patch_size", c.patch_size, 1);
  c.num_channels = hf::get_int(j, path, "num_channels", c.num_channels, 1);
  if (j.contains("qkv_bias")) {
    LB_CHECK(j.at("qkv_bias").is_boolean(), path, ".qkv_bias: expected true or false");
    c.qkv_bias = j.at("qkv_bias").get<bool>();
  }
  c.read_encoder(j, path);
  LB_CHECK(c.image_size % c.patch_size == 0, path, ": image_size ", c.image_size,
           " is not divisible by patch_size ", c.patch_size);
  hf::require_string(j, path, "model_type", "vit", "another architecture than ViT");
  check_parameters_fit(parameter_count(c), path, sizes_of(c));
  return c;
}

nlohmann::json ViTConfig::to_json() const {
  nlohmann::json j = {{"model_type", "vit"},
                      {"image_size", image_size},
                      {"patch_size", patch_size},
                      {"num_channels", num_channels},
                      {"qkv_bias", qkv_bias}};
  write_encoder(j);
  return j;
}

ViTLayer::ViTLayer(const ViTConfig& c) : act_(nn::activation_from_name(c.hidden_act)) {
  auto attention = register_module("attention", std::make_shared<nn::Container>("ViTAttention"));
  attn_ = attention->add("attention", std::make_shared<nn::SelfAttention>(
                                          c.hidden_size, c.num_attention_heads,
                                          c.attention_probs_dropout_prob, c.qkv_bias));
  auto attn_output = attention->add("output", std::make_shared<nn::Container>("ViTSelfOutput"));
  attn_out_ = attn_output->add("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
  auto intermediate = register_module("intermediate", std::make_shared<nn::Container>("ViTIntermediate"));
  intermediate_ = intermediate->add("dense", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size));
  auto output = register_module("output", std::make_shared<nn::Container>("ViTOutput"));
  out_ = output->add("dense", std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size));
  norm_before_ = register_module("layernorm_before", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  norm_after_ = register_module("layernorm_after", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor ViTLayer::forward(const Tensor& x) {
  return run_block(x, [this](const Tensor& xi) { return layer(xi); });
}

Tensor ViTLayer::layer(const Tensor& x) {
  // Pre-LN: h = x + drop(W_o attn(LN(x))); y = h + drop(W_2 act(W_1 LN(h))).
  const Tensor h = add(x, dropout_->forward(attn_out_->forward(attn_->forward(norm_before_->forward(x)))));
  const Tensor inter = nn::apply_activation(intermediate_->forward(norm_after_->forward(h)), act_);
  // Recomputed, nothing reads y's values, only its graph: the last product is skipped.
  const autograd::UnreadValuesScope unread;
  return add(h, dropout_->forward(out_->forward(inter)));
}

ViTForImageClassification::ViTForImageClassification(const ViTConfig& c) : config_(c) {
  auto vit = register_module("vit", std::make_shared<nn::Container>("ViTModel"));
  auto embeddings = vit->add("embeddings", std::make_shared<nn::Container>("ViTEmbeddings"));
  // cls_token and position_embeddings are parameters of "vit.embeddings" itself.
  auto patch_embeddings = embeddings->add("patch_embeddings", std::make_shared<nn::Container>("ViTPatchEmbeddings"));
  Conv2dArgs pa;
  pa.stride = {c.patch_size, c.patch_size};
  patch_ = patch_embeddings->add("projection", std::make_shared<nn::Conv2d>(c.num_channels, c.hidden_size, c.patch_size, pa));
  cls_token_ = Tensor::zeros({1, 1, c.hidden_size});
  position_embeddings_ = Tensor::zeros({1, c.num_patches() + 1, c.hidden_size});
  embeddings->add_parameter("cls_token", &cls_token_);
  embeddings->add_parameter("position_embeddings", &position_embeddings_);
  auto encoder = vit->add("encoder", std::make_shared<nn::Container>("ViTEncoder"));
  layers_ = encoder->add("layer", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_->push_back(std::make_shared<ViTLayer>(c));
  final_norm_ = vit->add("layernorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
  classifier_ = register_module("classifier", std::make_shared<nn::Linear>(c.hidden_size, c.num_labels));
  // Hugging Face ViTPreTrainedModel._init_weights: truncated-normal-like N(0, range) for
  // Linear/Conv weights and the position/CLS embeddings, zero biases, LayerNorm (1, 0).
  for (auto& [name, p] : named_parameters()) {
    if (name.find("layernorm") != std::string::npos) nn::init::constant_(p, name.ends_with(".weight") ? 1.0 : 0.0);
    else if (name.ends_with(".bias")) nn::init::constant_(p, 0.0);
    else nn::init::normal_(p, 0.0, c.initializer_range);
  }
}

ViTForImageClassification::Output ViTForImageClassification::forward(const Tensor& pixels,
                                                                     const Tensor& labels,
                                                                     double label_smoothing) {
  LB_CHECK(pixels.dim() == 4 && pixels.size(1) == config_.num_channels &&
               pixels.size(2) == config_.image_size && pixels.size(3) == config_.image_size,
           "ViT expects pixels (B, ", config_.num_channels, ", ", config_.image_size, ", ",
           config_.image_size, "), got ", shape_str(pixels.shape()));
  const int64_t B = pixels.size(0), H = config_.hidden_size;
  Tensor x = patch_->forward(pixels).flatten(2).transpose(1, 2);  // (B, N, H)
  x = concat({cls_token_.expand({B, 1, H}), x}, 1);               // (B, N+1, H)
  x = dropout_->forward(add(x, position_embeddings_));
  for (size_t i = 0; i < layers_->size(); ++i) x = static_cast<ViTLayer&>(*(*layers_)[i]).forward(x);
  x = final_norm_->forward(x);
  Output out;
  out.logits = classifier_->forward(x.select(1, 0));
  if (labels.defined()) out.loss = cross_entropy(out.logits, labels.to(DType::I64), -100, label_smoothing);
  return out;
}

}  // namespace lb::models
