// Loading Hugging Face model directories (config.json + model.safetensors, or a sharded
// model.safetensors.index.json) into our BERT and ViT. Names map directly (our parameter
// names are the HF state_dict keys) plus the legacy spellings HF itself accepts:
// LayerNorm.gamma/beta, and encoder-only checkpoints saved without the "bert."/"vit." prefix.
// Weights the checkpoint lacks (the classifier of a pretrained encoder, by design) keep their
// fresh initialisation and are reported (HfLoadReport::warning when more than the head is
// fresh, as from_pretrained warns); keys the model lacks (pre-training heads) are reported
// and ignored. Shape mismatches are errors naming the key and the file, and so is a
// checkpoint none of whose tensors matches a weight of the encoder (all renamed, or another
// model's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/bert.h"
#include "models/vit.h"

namespace lb::models {

struct HfLoadReport {
  std::string source;                    // the weights file (model.safetensors or its index)
  std::vector<std::string> initialized;  // model weights not in the checkpoint
  std::vector<std::string> unexpected;   // checkpoint tensors the model does not use
  std::string summary() const;           // one human-readable paragraph
  // "" when at most the classifier head is freshly initialised; else a paragraph starting
  // "WARNING:" with how many weights and the first few (and the unused tensors), for stderr.
  std::string warning() const;
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
