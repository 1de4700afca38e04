// The model a config names, built (fresh or from a Hugging Face directory) and run on a
// data::Batch: BERT on text inputs, ViT and ResNet on images. One interface, so the trainer
// never branches on the model type.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "lb/data/batch.h"
#include "lb/nn/module.h"
#include "lb/train/config.h"
#include "lb/train/train_step.h"

namespace lb::train {

struct ModelOutput {
  Tensor logits;  // (B, num_labels)
  Tensor loss;    // scalar mean over the batch; undefined without labels
};

class TaskModel {
 public:
  virtual ~TaskModel() = default;
  virtual nn::Module& module() = 0;
  // The batch's tensors are moved to the model's device (to(), below) on the way in; the
  // outputs stay there.
  virtual ModelOutput forward(const data::Batch& batch) = 0;
  virtual nlohmann::json model_config() const = 0;  // the architecture actually built
  // Padding-free execution of padded text batches (models without padding ignore it).
  virtual void set_skip_padding(bool) {}
  // Moves the parameters and buffers to `d` (before an optimizer is built on them).
  void to(Device d) {
    module().to(d);
    device_ = d;
  }
  Device device() const { return device_; }
  // Parameters build_task_model initialised at random rather than read from model.pretrained
  // (or its PEFT adapter): every one without pretrained weights, a new task head with them.
  // LoRA's fresh factors are not counted (B = 0: the adapted model equals its base).
  const std::vector<std::string>& fresh_parameters() const { return fresh_; }
  void set_fresh_parameters(std::vector<std::string> names) { fresh_ = std::move(names); }

 protected:
  Tensor on_device(const Tensor& t) const { return t.defined() ? t.to(device_) : t; }

 private:
  Device device_ = Device::cpu();
  std::vector<std::string> fresh_;
};

// Builds the model of `config.model` with `num_labels` outputs. Text models with random
// initialisation take vocab_size from `vocab_size` unless the config sets it. `log` receives
// the Hugging Face load report (weights newly initialised / unused).
std::unique_ptr<TaskModel> build_task_model(const Config& config, int64_t num_labels,
                                            int64_t vocab_size, std::string* log = nullptr);

// A model.pretrained directory that is not there is an error saying so, and how to get the
// MiniLM the configs name (tools/fetch_pretrained.sh); nothing when it is there or unset.
void check_pretrained_present(const Config& config);

// The LoRA targets build_task_model applies: the config's, with PEFT's defaults per model
// filled in (BERT, ViT: query and value; the head as modules_to_save).
nn::LoraTargets lora_targets(const Config& config);

// The batches as a TrainStep's micro-batches of `model` (the batches must outlive them).
std::vector<MicroBatch> micro_batches(TaskModel& model, const std::vector<data::Batch>& batches);

}  // namespace lb::train
