// build_task_model (see task_model.h).
#include "lb/train/task_model.h"

#include <filesystem>
#include <iostream>
#include <set>

#include "lb/core/error.h"
#include "lb/train/export/peft_adapter.h"
#include "models/bert.h"
#include "models/hf_import.h"
#include "models/resnet.h"
#include "models/vit.h"

namespace lb::train {

namespace {

const Tensor& input(const data::Batch& b, const std::string& name) {
  auto it = b.inputs.find(name);
  LB_CHECK(it != b.inputs.end(), "model input '", name, "' is missing from the batch");
  return it->second;
}

class BertTask : public TaskModel {
 public:
  explicit BertTask(std::unique_ptr<models::BertForSequenceClassification> m) : m_(std::move(m)) {}
  nn::Module& module() override { return *m_; }
  ModelOutput forward(const data::Batch& b) override {
    auto out = m_->forward(on_device(input(b, "input_ids")), on_device(input(b, "token_type_ids")),
                           on_device(input(b, "attention_mask")), on_device(b.labels));
    return {out.logits, out.loss};
  }
  nlohmann::json model_config() const override { return m_->config().to_json(); }
  void set_skip_padding(bool on) override { m_->set_skip_padding(on); }

 private:
  std::unique_ptr<models::BertForSequenceClassification> m_;
};

// ViT and ResNet: images in, label smoothing in training mode only.
template <typename M>
class ImageTask : public TaskModel {
 public:
  ImageTask(std::unique_ptr<M> m, double smoothing) : m_(std::move(m)), smoothing_(smoothing) {}
  nn::Module& module() override { return *m_; }
  ModelOutput forward(const data::Batch& b) override {
    auto out =
        m_->forward(on_device(input(b, "images")), on_device(b.labels), m_->is_training() ? smoothing_ : 0.0);
    return {out.logits, out.loss};
  }
  nlohmann::json model_config() const override { return m_->config().to_json(); }

 private:
  std::unique_ptr<M> m_;
  double smoothing_;
};
using VitTask = ImageTask<models::ViTForImageClassification>;
using ResNetTask = ImageTask<models::ResNet>;

// The weights' load report: into *log (the trainer prints it on rank 0), with the loud
// warning when more than the classifier head starts from random initialisation (printed
// here when there is no log, e.g. eval and predict).
void report_load(const models::HfLoadReport& report, std::string* log) {
  const std::string w = report.warning();
  if (log) *log = report.summary() + (w.empty() ? "" : "\n" + w);
  else if (!w.empty()) std::cerr << "leanback: " << w << "\n";
}

}  // namespace

namespace {

// `fresh`: the parameters initialised at random (with pretrained weights, those the directory
// lacks; without, none is reported here: build_task_model counts every parameter).
std::unique_ptr<TaskModel> build_bare(const Config& config, int64_t num_labels, int64_t vocab_size, std::string* log,
                                      std::vector<std::string>& fresh) {
  const ModelSection& m = config.model;
  const int64_t labels = m.num_labels > 0 ? m.num_labels : num_labels;
  LB_CHECK(labels > 0, config.source, ": model.num_labels: the task does not define it; set it");
  LB_CHECK(m.num_labels == 0 || m.num_labels == num_labels || num_labels == 0, config.source,
           ": model.num_labels is ", m.num_labels, " but the task has ", num_labels, " labels");
  const double smoothing = config.train.label_smoothing;
  if (m.type == "bert") {
    LB_CHECK(smoothing == 0, config.source,
             ": train.label_smoothing: not supported for BERT sequence classification");
    if (!m.pretrained.empty()) {
      models::HfLoadReport report;
      auto model = models::load_hf_bert(m.pretrained, labels, &report, m.arch);
      report_load(report, log);
      fresh = report.initialized;
      LB_CHECK(vocab_size == 0 || model->config().vocab_size >= vocab_size, config.source,
               ": the tokenizer has ", vocab_size, " tokens but ", m.pretrained, " has vocab_size ",
               model->config().vocab_size);
      // Before any training: a sequence longer than the position table fails only when it
      // is first seen, which may be the final evaluation.
      LB_CHECK(model->config().max_position_embeddings >= config.data.max_seq_len, config.source,
               ": data.max_seq_len ", config.data.max_seq_len, " exceeds max_position_embeddings ",
               model->config().max_position_embeddings, " of the pretrained model (",
               (std::filesystem::path(m.pretrained) / "config.json").string(),
               "); set data.max_seq_len to at most that");
      model->set_skip_padding(m.skip_padding != "false");
      return std::make_unique<BertTask>(std::move(model));
    }
    nlohmann::json arch = m.arch;
    if (!arch.contains("vocab_size") && vocab_size > 0) arch["vocab_size"] = vocab_size;
    arch["num_labels"] = labels;
    auto cfg = models::BertConfig::from_json(arch, "model");
    LB_CHECK(vocab_size == 0 || cfg.vocab_size >= vocab_size, config.source,
             ": model.vocab_size ", cfg.vocab_size, " is smaller than the tokenizer's ", vocab_size);
    LB_CHECK(cfg.max_position_embeddings >= config.data.max_seq_len, config.source,
             ": data.max_seq_len ", config.data.max_seq_len, " exceeds model.max_position_embeddings ",
             cfg.max_position_embeddings);
    auto model = std::make_unique<models::BertForSequenceClassification>(cfg);
    // "auto" is on here (evaluation and prediction run no backward); train() resolves it
    // against the backward plan.
    model->set_skip_padding(m.skip_padding != "false");
    return std::make_unique<BertTask>(std::move(model));
  }
  if (m.type == "vit") {
    if (!m.pretrained.empty()) {
      models::HfLoadReport report;
      auto model = models::load_hf_vit(m.pretrained, labels, &report, m.arch);
      report_load(report, log);
      fresh = report.initialized;
      return std::make_unique<VitTask>(std::move(model), smoothing);
    }
    nlohmann::json arch = m.arch;
    arch["num_labels"] = labels;
    auto cfg = models::ViTConfig::from_json(arch, "model");
    return std::make_unique<VitTask>(std::make_unique<models::ViTForImageClassification>(cfg),
                                     smoothing);
  }
  nlohmann::json arch = models::ResNetConfig().to_json();
  arch.update(m.arch);
  arch["num_classes"] = labels;
  auto cfg = models::ResNetConfig::from_json(arch, "model");
  return std::make_unique<ResNetTask>(std::make_unique<models::ResNet>(cfg), smoothing);
}

}  // namespace

nn::LoraTargets lora_targets(const Config& config) {
  nn::LoraTargets t = config.lora.targets;
  const bool resnet = config.model.type == "resnet";
  LB_CHECK(!t.modules.empty() || !resnet, config.source, ": lora.target_modules: give the Linear layers to adapt "
           "(a ResNet's convolutions take no LoRA adapter; its one Linear is the head, fc)");
  if (t.modules.empty()) t.modules = {"query", "value"};
  if (t.modules_to_save.empty()) t.modules_to_save = {resnet ? "fc" : "classifier"};
  return t;
}

void check_pretrained_present(const Config& config) {
  const std::string& dir = config.model.pretrained;
  if (dir.empty() || std::filesystem::exists(dir)) return;
  LB_FAIL(config.source, ": model.pretrained: ", dir, " does not exist. The MiniLM the configs name is ",
          "fetched once by tools/fetch_pretrained.sh (into $LEANBACK_HOME/models, ~/.cache/leanback/models by "
          "default); any Hugging Face BERT or ViT directory works too: --set model.pretrained=DIR");
}

std::unique_ptr<TaskModel> build_task_model(const Config& config, int64_t num_labels, int64_t vocab_size,
                                            std::string* log) {
  check_pretrained_present(config);
  std::vector<std::string> fresh;
  std::unique_ptr<TaskModel> model = build_bare(config, num_labels, vocab_size, log, fresh);
  if (config.model.pretrained.empty())
    for (const auto& [name, p] : model->module().named_parameters()) fresh.push_back(name);
  if (config.lora.enabled) {
    try {
      nn::apply_lora(model->module(), config.lora.settings, lora_targets(config));
    } catch (const Error& e) {
      const std::string what = e.what();
      throw Error(what.rfind(config.source, 0) == 0 ? what : config.source + ": " + what);
    }
    if (!config.model.adapter.empty()) {
      const std::vector<std::string> loaded = load_peft_adapter(model->module(), config.model.adapter);
      const std::set<std::string> got(loaded.begin(), loaded.end());
      std::erase_if(fresh, [&](const std::string& n) { return got.count(n) > 0; });
    }
  }
  model->set_fresh_parameters(std::move(fresh));
  return model;
}

std::vector<MicroBatch> micro_batches(TaskModel& model, const std::vector<data::Batch>& batches) {
  std::vector<MicroBatch> micro;
  micro.reserve(batches.size());
  for (const auto& b : batches) micro.push_back({b.size(), [&model, &b] { return model.forward(b).loss; }});
  return micro;
}

}  // namespace lb::train
