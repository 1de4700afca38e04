// BERT for sequence classification (Devlin et al. 2019; Hugging Face modeling_bert.py layout).
#include "models/bert.h"

#include <cmath>
#include <optional>

#include "lb/autograd/module_scope.h"
#include "lb/autograd/recompute.h"
#include "lb/nn/init.h"
#include "models/hf_config.h"
#include "models/model_size.h"

namespace lb::models {

namespace {

// The parameters BertForSequenceClassification(c) allocates, counted before it does.
ParamCount parameter_count(const BertConfig& c) {
  const int64_t h = c.hidden_size, i = c.intermediate_size;
  ParamCount layer;
  layer.add({4, h, h}).add({4, h}).add({h, i}).add({i}).add({i, h}).add({h}).add({4, h});
  ParamCount n;
  n.add({c.vocab_size, h}).add({c.max_position_embeddings, h}).add({c.type_vocab_size, h}).add({2, h});
  n.add_times(layer, c.num_hidden_layers);
  n.add({h, h}).add({h}).add({h, c.num_labels}).add({c.num_labels});
  return n;
}

std::string sizes_of(const BertConfig& c) {
  return "vocab_size " + std::to_string(c.vocab_size) + ", hidden_size " + std::to_string(c.hidden_size) +
         ", num_hidden_layers " + std::to_string(c.num_hidden_layers) + ", intermediate_size " +
         std::to_string(c.intermediate_size) + ", max_position_embeddings " +
         std::to_string(c.max_position_embeddings) + ", type_vocab_size " + std::to_string(c.type_vocab_size) +
         ", num_labels " + std::to_string(c.num_labels);
}

// Hugging Face BertPreTrainedModel._init_weights: N(0, initializer_range) for Linear and
// Embedding weights, zero biases, LayerNorm (1, 0).
void init_bert_weights(nn::Module& m, double std) {
  for (auto& [name, p] : m.named_parameters()) {
    const bool is_norm = name.find("LayerNorm") != std::string::npos;
    if (is_norm) nn::init::constant_(p, name.ends_with(".weight") ? 1.0 : 0.0);
    else if (name.ends_with(".bias")) nn::init::constant_(p, 0.0);
    else nn::init::normal_(p, 0.0, std);
  }
}
}  // namespace

BertConfig BertConfig::from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected a JSON object");
  BertConfig c;
  c.vocab_size = hf::get_int(j, path, "vocab_size", c.vocab_size, 1);
  c.max_position_embeddings = hf::get_int(j, path, "max_position_embeddings", c.max_position_embeddings, 1);
  c.type_vocab_size = hf::get_int(j, path, "type_vocab_size", c.type_vocab_size, 1);
  c.read_encoder(j, path);
  // HF BertForSequenceClassification: classifier_dropout, or hidden_dropout_prob when null.
  if (j.contains("classifier_dropout") && !j.at("classifier_dropout").is_null())
    c.classifier_dropout = hf::get_num(j, path, "classifier_dropout", 0.0, 0.0, 0.999);
  // Settings that would build another model from the same weights are refused, not ignored.
  hf::require_string(j, path, "model_type", "bert", "another architecture than BERT");
  hf::require_string(j, path, "position_embedding_type", "absolute",
                     "relative position scores inside attention");
  hf::require_false(j, path, "is_decoder", "a causal attention mask");
  hf::require_false(j, path, "add_cross_attention", "cross-attention layers of a decoder");
  if (j.contains("problem_type") && !j.at("problem_type").is_null()) {
    const auto& v = j.at("problem_type");
    LB_CHECK(v.is_string() && v.get<std::string>() != "multi_label_classification", path,
             ".problem_type: ", v.dump(), " is not implemented (a sigmoid loss per label); valid: "
             "\"single_label_classification\", \"regression\" or null");
  }
  check_parameters_fit(parameter_count(c), path, sizes_of(c));
  return c;
}

nlohmann::json BertConfig::to_json() const {
  nlohmann::json j = {{"model_type", "bert"},
                      {"vocab_size", vocab_size},
                      {"max_position_embeddings", max_position_embeddings},
                      {"type_vocab_size", type_vocab_size}};
  write_encoder(j);
  if (classifier_dropout) j["classifier_dropout"] = *classifier_dropout;
  return j;
}

BertEmbeddings::BertEmbeddings(const BertConfig& c) {
  word_ = register_module("word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, c.hidden_size, 0));
  position_ = register_module("position_embeddings",
                              std::make_shared<nn::Embedding>(c.max_position_embeddings, c.hidden_size));
  token_type_ = register_module("token_type_embeddings",
                                std::make_shared<nn::Embedding>(c.type_vocab_size, c.hidden_size));
  norm_ = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& types, const Tensor& positions) {
  const autograd::ModuleScope scope(path());
  if (!positions.defined()) {
    const int64_t T = ids.size(1);
    LB_CHECK(T <= position_->weight().size(0), "sequence length ", T,
             " exceeds max_position_embeddings ", position_->weight().size(0));
  }
  const Tensor pos =
      positions.defined() ? positions : Tensor::arange(ids.size(1)).unsqueeze(0).to(ids.device());  // (1, T)
  const Tensor tt = types.defined() ? types : Tensor::zeros(ids.shape(), DType::I64, ids.device());
  Tensor e = add(add(word_->forward(ids), token_type_->forward(tt)), position_->forward(pos));
  return dropout_->forward(norm_->forward(e));
}

BertLayer::BertLayer(const BertConfig& c) : act_(nn::activation_from_name(c.hidden_act)) {
  auto attention = register_module("attention", std::make_shared<nn::Container>("BertAttention"));
  self_ = attention->add("self", std::make_shared<nn::SelfAttention>(
                                     c.hidden_size, c.num_attention_heads, c.attention_probs_dropout_prob));
  auto attn_output = attention->add("output", std::make_shared<nn::Container>("BertSelfOutput"));
  attn_out_ = attn_output->add("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
  attn_norm_ = attn_output->add("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  auto intermediate = register_module("intermediate", std::make_shared<nn::Container>("BertIntermediate"));
  intermediate_ = intermediate->add("dense", std::make_shared<nn::Linear>(c.hidden_size, c.intermediate_size));
  auto output = register_module("output", std::make_shared<nn::Container>("BertOutput"));
  out_ = output->add("dense", std::make_shared<nn::Linear>(c.intermediate_size, c.hidden_size));
  out_norm_ = output->add("LayerNorm", std::make_shared<nn::LayerNorm>(c.hidden_size, c.layer_norm_eps));
  dropout_ = register_module("dropout", std::make_shared<nn::Dropout>(c.hidden_dropout_prob));
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& mask, const nn::TokenPacking* packing) {
  // The recomputation runs in backward, after the caller's packing is gone: it keeps a copy.
  std::optional<nn::TokenPacking> kept;
  if (packing) kept = *packing;
  // The last LayerNorm runs outside the recomputed part: it keeps its input z anyway, the next
  // block's recomputation keeps z in place of its own input (LayerNorm gives it back), and
  // the recomputation then reads no value of z, so it skips z's last product.
  const Tensor z = run_block(x, [this, mask, kept](const Tensor& xi) { return layer(xi, mask, kept ? &*kept : nullptr); });
  return out_norm_->forward(z);
}

Tensor BertLayer::layer(const Tensor& x, const Tensor& mask, const nn::TokenPacking* packing) {
  // Post-LN: h = LN(x + drop(W_o attn(x))); z = h + drop(W_2 act(W_1 h)); forward's y = LN(z).
  nn::backward::CallContext call;  // packed: every Linear call is (1, N, ·) over these sequences
  if (packing) call.sequences = packing->sequence_offsets();
  const Tensor ctx = packing ? self_->forward_packed(x, mask, *packing) : self_->forward(x, mask);
  const Tensor h = attn_norm_->forward(add(x, dropout_->forward(attn_out_->forward(ctx, call))));
  const Tensor inter = nn::apply_activation(intermediate_->forward(h, call), act_);
  const autograd::UnreadValuesScope unread;  // recomputed, nothing reads z's values
  return add(h, dropout_->forward(out_->forward(inter, call)));
}

BertForSequenceClassification::BertForSequenceClassification(const BertConfig& c) : config_(c) {
  auto bert = register_module("bert", std::make_shared<nn::Container>("BertModel"));
  embeddings_ = bert->add("embeddings", std::make_shared<BertEmbeddings>(c));
  auto encoder = bert->add("encoder", std::make_shared<nn::Container>("BertEncoder"));
  layers_ = encoder->add("layer", std::make_shared<nn::ModuleList>());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers_->push_back(std::make_shared<BertLayer>(c));
  auto pooler = bert->add("pooler", std::make_shared<nn::Container>("BertPooler"));
  pooler_ = pooler->add("dense", std::make_shared<nn::Linear>(c.hidden_size, c.hidden_size));
  dropout_ = register_module("dropout",
                             std::make_shared<nn::Dropout>(c.classifier_dropout.value_or(c.hidden_dropout_prob)));
  classifier_ = register_module("classifier", std::make_shared<nn::Linear>(c.hidden_size, c.num_labels));
  init_bert_weights(*this, c.initializer_range);
}

SequenceClassifierOutput BertForSequenceClassification::forward(const Tensor& ids,
                                                                const Tensor& types,
                                                                const Tensor& keep_mask,
                                                                const Tensor& labels) {
  LB_CHECK(ids.dim() == 2, "input_ids must be (B, T), got ", shape_str(ids.shape()));
  const DType dt = pooler_->weight().dtype();
  const Tensor mask = keep_mask.defined() ? nn::additive_attention_mask(keep_mask, dt) : Tensor();
  const Tensor tt = types.defined() ? types : Tensor::zeros(ids.shape(), DType::I64, ids.device());
  Tensor first_tokens;  // (B, H): the pooler's input
  std::optional<nn::TokenPacking> packing;
  if (skip_padding_ && keep_mask.defined() && ids.size(1) <= config_.max_position_embeddings) {
    packing = nn::TokenPacking::from_keep_mask(keep_mask);
    // Nothing to skip, or not the right-padded layout: a sequence whose [CLS] is masked (the
    // pooler reads it anyway) or with holes (the strategies' packed sequences are prefixes).
    if (!packing->has_padding() || !packing->keeps_prefixes()) packing.reset();
  }
  if (packing) {
    // The layers' strategies see (1, N, H) calls; per-sequence ones (INSTANT's token axis)
    // get the sequence boundaries with each call (BertLayer::forward).
    Tensor h = embeddings_->forward(packing->pack(ids), packing->pack(tt), packing->positions());
    for (size_t i = 0; i < layers_->size(); ++i)
      h = static_cast<BertLayer&>(*(*layers_)[i]).forward(h, mask, &*packing);
    first_tokens = packing->first_tokens(h);
  } else {
    Tensor h = embeddings_->forward(ids, tt);
    for (size_t i = 0; i < layers_->size(); ++i)
      h = static_cast<BertLayer&>(*(*layers_)[i]).forward(h, mask);
    first_tokens = h.select(1, 0);
  }
  const Tensor pooled = tanh(pooler_->forward(first_tokens));
  SequenceClassifierOutput out;
  out.logits = classifier_->forward(dropout_->forward(pooled));
  if (labels.defined()) {
    if (config_.num_labels == 1)
      out.loss = mse_loss(out.logits.reshape({-1}), labels.to(dt));
    else
      out.loss = cross_entropy(out.logits, labels.to(DType::I64));
  }
  return out;
}

}  // namespace lb::models
