// Hugging Face checkpoint import (see hf_import.h).
#include "models/hf_import.h"

#include "lb/io/json_file.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lb/io/printable.h"
#include "lb/io/safetensors.h"
#include "lb/nn/init.h"

namespace lb::models {

namespace fs = std::filesystem;

namespace {
nlohmann::json read_json(const fs::path& p) { return io::read_json_file(p.string()); }

// The checkpoint key for a model key, trying HF's accepted spellings.
const Tensor* find_weight(const std::map<std::string, Tensor>& ckpt, const std::string& key,
                          const std::string& prefix, std::string* used) {
  std::vector<std::string> candidates{key};
  auto legacy = [](std::string k) {
    if (k.ends_with("LayerNorm.weight")) k.replace(k.size() - 6, 6, "gamma");
    else if (k.ends_with("LayerNorm.bias")) k.replace(k.size() - 4, 4, "beta");
    return k;
  };
  candidates.push_back(legacy(key));
  if (key.rfind(prefix, 0) == 0) {
    candidates.push_back(key.substr(prefix.size()));
    candidates.push_back(legacy(key.substr(prefix.size())));
  }
  for (const auto& c : candidates) {
    auto it = ckpt.find(c);
    if (it != ckpt.end()) {
      *used = c;
      return &it->second;
    }
  }
  return nullptr;
}

// The task head a pretrained encoder is expected to lack: HF's classifier.weight/bias.
bool is_head(const std::string& key) { return key.rfind("classifier.", 0) == 0; }

// "a, b, c, d, e, ... (12 in all)": the first few of `names`.
std::string first_names(const std::vector<std::string>& names, size_t shown = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > shown) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// The weights file(s) read_hf_weights reads, for messages.
std::string weights_file(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  return (fs::exists(single) ? single : fs::path(dir) / "model.safetensors.index.json").string();
}

void load_into(nn::Module& model, const std::map<std::string, Tensor>& ckpt,
               const std::string& prefix, const std::string& dir, HfLoadReport* report) {
  std::map<std::string, Tensor> mapped;
  std::set<std::string> used_keys;
  HfLoadReport r;
  r.source = weights_file(dir);
  bool base_matched = false;
  for (const auto& [key, t] : model.state_dict()) {
    std::string used;
    const Tensor* w = find_weight(ckpt, key, prefix, &used);
    if (!w) {
      r.initialized.push_back(key);
      continue;
    }
    LB_CHECK(w->shape() == t.shape(), dir, ": checkpoint tensor '", used, "' has shape ",
             shape_str(w->shape()), " but the model's '", key, "' is ", shape_str(t.shape()),
             ". HINT: check config.json against the weights");
    mapped[key] = *w;
    used_keys.insert(used);
    base_matched = base_matched || !is_head(key);
  }
  for (const auto& [k, _] : ckpt)
    if (!used_keys.count(k)) r.unexpected.push_back(k);
  // Without one base tensor, training would start from random weights under a pretrained name.
  std::vector<std::string> names;
  for (const auto& [k, _] : ckpt) names.push_back(k);
  LB_CHECK(base_matched, r.source, ": none of its ", ckpt.size(), " tensors",
           names.empty() ? "" : " (" + first_names(names, 3) + ")",
           " matches a weight of the model's encoder (first: '",
           model.state_dict().front().first, "'); is this the right kind of model? "
           "HINT: the names must be Hugging Face's, with or without the '", prefix, "' prefix");
  model.load_state_dict(mapped, /*strict=*/false);
  if (report) *report = r;
}
}  // namespace

std::string HfLoadReport::warning() const {
  std::vector<std::string> fresh;
  for (const auto& k : initialized)
    if (!is_head(k)) fresh.push_back(k);
  if (fresh.empty()) return "";
  std::string w = "WARNING: " + std::to_string(fresh.size()) + " weight(s) of the model beyond the classifier head are not in " +
                  source + " and start from random initialisation: " + first_names(fresh) +
                  ". Fine-tuning starts from a partly untrained model";
  if (!unexpected.empty())
    w += "; " + std::to_string(unexpected.size()) + " checkpoint tensor(s) went unused: " + first_names(unexpected) +
         " (HINT: renamed tensors?)";
  return w;
}

std::string HfLoadReport::summary() const {
  std::ostringstream os;
  os << initialized.size() << " weight(s) not in the checkpoint, freshly initialised";
  for (size_t i = 0; i < initialized.size() && i < 8; ++i) os << (i ? ", " : ": ") << initialized[i];
  os << "; " << unexpected.size() << " checkpoint tensor(s) unused";
  for (size_t i = 0; i < unexpected.size() && i < 8; ++i) os << (i ? ", " : ": ") << unexpected[i];
  if (unexpected.size() > 8) os << ", ...";
  return os.str();
}

nlohmann::json read_hf_config(const std::string& dir) {
  const fs::path p = fs::path(dir) / "config.json";
  LB_CHECK(fs::is_directory(dir), "Hugging Face model directory ", dir, " does not exist");
  LB_CHECK(fs::exists(p), dir, " has no config.json; a Hugging Face model directory holds "
           "config.json and model.safetensors");
  nlohmann::json j = read_json(p);
  LB_CHECK(j.is_object(), p.string(), ": expected a JSON object (a Hugging Face model config), got ",
           j.type_name());
  return j;
}

namespace {
// load_into a model built under `deferred`, then the random initialisation of what the
// checkpoint lacks (the classifier head): the values eager initialisation gives, for a
// fraction of its draws.
void load_deferred(nn::Module& model, nn::init::DeferredInit& deferred, const std::map<std::string, Tensor>& ckpt,
                   const std::string& prefix, const std::string& dir, HfLoadReport* report) {
  HfLoadReport local;
  HfLoadReport& r = report ? *report : local;
  load_into(model, ckpt, prefix, dir, &r);
  const std::set<std::string> lacking(r.initialized.begin(), r.initialized.end());
  std::set<const Storage*> loaded;  // load_state_dict copies into the model's own storages
  for (const auto& [key, t] : model.state_dict())
    if (!lacking.count(key)) loaded.insert(t.storage().get());
  deferred.replay([&](const Storage* s) { return !loaded.count(s); });
}
}  // namespace

std::map<std::string, Tensor> read_hf_weights(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::map<std::string, Tensor> out;
  auto add_file = [&](const fs::path& f) {
    const io::SafetensorsFile file = io::load_safetensors(f.string());
    io::check_finite(file);
    for (auto& [n, t] : file.tensors) out[n] = t;
  };
  if (fs::exists(single)) {
    add_file(single);
  } else if (fs::exists(index)) {
    const auto j = read_json(index);
    LB_CHECK(j.contains("weight_map") && j.at("weight_map").is_object(), index.string(),
             ": no weight_map object");
    std::set<std::string> shards;
    for (auto& [k, v] : j.at("weight_map").items()) {
      LB_CHECK(v.is_string(), index.string(), ": weight_map.", io::printable(k), ": expected a file name, got ",
               v.dump());
      shards.insert(v.get<std::string>());
    }
    for (const auto& s : shards) add_file(fs::path(dir) / s);
  } else {
    const bool has_bin = fs::exists(fs::path(dir) / "pytorch_model.bin");
    LB_FAIL(dir, " has no model.safetensors",
            has_bin ? ". HINT: it has pytorch_model.bin; convert it with "
                      "`python3 tools/convert_bin_to_safetensors.py " + dir + "`"
                    : "");
  }
  return out;
}

std::unique_ptr<BertForSequenceClassification> load_hf_bert(const std::string& dir,
                                                            int64_t num_labels,
                                                            HfLoadReport* report,
                                                            const nlohmann::json& overrides) {
  nlohmann::json j = read_hf_config(dir);
  if (overrides.is_object()) j.update(overrides);
  BertConfig c = BertConfig::from_json(j, dir + "/config.json");
  if (num_labels > 0) c.num_labels = num_labels;
  nn::init::DeferredInit deferred;
  auto model = std::make_unique<BertForSequenceClassification>(c);
  load_deferred(*model, deferred, read_hf_weights(dir), "bert.", dir, report);
  return model;
}

std::unique_ptr<ViTForImageClassification> load_hf_vit(const std::string& dir, int64_t num_labels,
                                                       HfLoadReport* report,
                                                       const nlohmann::json& overrides) {
  nlohmann::json j = read_hf_config(dir);
  if (overrides.is_object()) j.update(overrides);
  ViTConfig c = ViTConfig::from_json(j, dir + "/config.json");
  if (num_labels > 0) c.num_labels = num_labels;
  nn::init::DeferredInit deferred;
  auto model = std::make_unique<ViTForImageClassification>(c);
  load_deferred(*model, deferred, read_hf_weights(dir), "vit.", dir, report);
  return model;
}

}  // namespace lb::models
