// Loading Hugging Face model directories (config.json + model.safetensors, or a sharded
// model.safetensors.index.json) into our BERT and ViT. Names map directly (our parameter
// names are the HF state_dict keys) plus the legacy spellings HF itself accepts:
// LayerNorm.gamma/beta, and encoder-only checkpoints saved without the "bert."/"vit." prefix.
// Weights the checkpoint lacks (the classifier of a pretrained encoder, by design) keep their
// fresh initialisation and are reported; keys the model lacks (pre-training heads) are
// reported and ignored. Shape mismatches are errors naming the key and the file.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/bert.h"
#include "models/vit.h"

namespace lb::models {

struct HfLoadReport {
  std::vector<std::string> initialized;  // model weights not in the checkpoint
  std::vector<std::string> unexpected;   // checkpoint tensors the model does not use
  std::string summary() const;           // one human-readable paragraph
};

// num_labels > 0 overrides the config's (a new task head on a pretrained encoder);
// `overrides` replaces keys of config.json before it is parsed (as from_pretrained(dir,
// hidden_dropout_prob=0.0) does; the caller decides which keys may change).
std::unique_ptr<BertForSequenceClassification> load_hf_bert(const std::string& dir,
                                                            int64_t num_labels,
                                                            HfLoadReport* report = nullptr,
                                                            const nlohmann::json& overrides = {});
std::unique_ptr<ViTForImageClassification> load_hf_vit(const std::string& dir, int64_t num_labels,
                                                       HfLoadReport* report = nullptr,
                                                       const nlohmann::json& overrides = {});

// Reads dir/config.json (errors name the file).
nlohmann::json read_hf_config(const std::string& dir);
// All tensors of dir's weights (single file or shards), by checkpoint name.
std::map<std::string, Tensor> read_hf_weights(const std::string& dir);

}  // namespace lb::models
