// `leanback export`: a trained checkpoint as a directory other tools open.
//   BERT, ViT   a Hugging Face model directory: config.json (architecture, id2label /
//               label2id with the task's label names, problem_type), model.safetensors, and
//               the tokenizer files (vocab.txt, tokenizer_config.json,
//               special_tokens_map.json) or the image processor's (preprocessor_config.json),
//               so that AutoModelForSequenceClassification / AutoModelForImageClassification
//               and AutoTokenizer / AutoImageProcessor .from_pretrained(DIR) reproduce
//               `leanback eval`.
//   with LoRA   unmerged (default): PEFT's adapter_config.json + adapter_model.safetensors
//               (keys "base_model.model.<name>": the adapters, what else trained, and any base
//               weight leanback initialised itself, e.g. the head), which
//               peft.PeftModel.from_pretrained(base, DIR) loads onto the pretrained base
//               (adapter_config's base_model_name_or_path), plus the tokenizer / image
//               processor files; merged (merge = true): W + (alpha/r) B A, a plain model
//               directory as above.
//   ResNet      model.safetensors with torchvision's state_dict names (torchvision.models.
//               resnet18/34/50; the CIFAR stem replaces conv1 by a 3×3 stride-1 conv and
//               maxpool by Identity) and config.json naming that (not a Hugging Face config).
// The output directory is one leanback creates (or finds empty) and marks; an earlier export
// there is replaced only with overwrite, and only the files export writes (output_dir.h).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/train/config.h"

namespace lb::train {

// What a checkpoint's model predicts: the task's label names (id order) and whether it is a
// regression. Trainer checkpoints carry it ("task" in trainer_state.json).
struct TaskLabels {
  std::vector<std::string> names;  // may be empty (then LABEL_<i>)
  int64_t num_labels = 0;
  bool regression = false;
  nlohmann::json to_json() const;
  static TaskLabels from_json(const nlohmann::json& j, const std::string& path);
};

struct ExportOptions {
  bool merge = false;      // LoRA: fold the adapters into the weights (a plain model)
  bool overwrite = false;  // replace an earlier export in the same directory
  // Of a run directory, its newest checkpoint rather than its best (find_best_checkpoint).
  bool latest = false;
  // LoRA adapters: the base model's name written as base_model_name_or_path; "" = the base
  // directory's Hugging Face name (model_name.h), else its path here (said on stderr).
  std::string base_model;
};

struct ExportSummary {
  std::string checkpoint;          // the checkpoint exported
  std::string format;              // "transformers", "peft", "torchvision"
  std::vector<std::string> files;  // written, in order
  std::string usage;               // how to open it (Python), for the CLI to print
};

// Whether a run of `c` could export as its output.export asks, checked before training (an
// export refused after hours of it loses nothing, but tells the user too late): "merged" needs
// LoRA adapters; a LoRA adapter needs a Hugging Face base (model.pretrained, not ResNet) for
// PEFT to load it onto. Throws an Error naming output.export.
void check_export_setting(const Config& c);

// Exports `run_or_checkpoint` (a run directory: its latest checkpoint, the one `leanback eval`
// reads; or a checkpoint directory) into `out`. `flag` names the output option in errors.
ExportSummary export_checkpoint(const std::string& run_or_checkpoint, const std::filesystem::path& out,
                                const ExportOptions& options, const std::string& flag = "--out");

}  // namespace lb::train
