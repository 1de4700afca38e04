// LoRA (Hu et al., 2021) in Hugging Face PEFT's layout: a targeted Linear computes
//   y = x Wᵀ + b + (alpha / r) · B A dropout(x),   A (r × in), B (out × r)
// with its own weight frozen. A and B are the Linear's children "lora_A" and "lora_B"
// (parameters "<layer>.lora_A.weight", "<layer>.lora_B.weight", PEFT's names below
// "base_model.model."), A Kaiming-uniform as PEFT initialises it (U(±1/√in)), B zeros, so a
// fresh adapter leaves the model's output as it was. Merging folds (alpha / r) · B A into W
// (the adapter then adds nothing); unmerging takes it out again.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lb/core/tensor.h"
#include "lb/nn/module.h"

namespace lb::nn {

struct LoraSettings {
  int64_t r = 8;
  double alpha = 8;     // PEFT's lora_alpha default
  double dropout = 0;   // on the adapter's input only, as PEFT's lora_dropout
  double scale() const { return alpha / static_cast<double>(r); }
};

// One factor of an adapter: a weight and nothing else (not a Linear, so that backward
// policies, codecs' module globs and LoRA targets never take it for a layer).
class LoraFactor : public Module {
 public:
  LoraFactor(int64_t rows, int64_t cols);
  std::string type_name() const override { return "LoraFactor"; }
  std::string extra_repr() const override;
  Tensor& weight() { return weight_; }

 private:
  Tensor weight_;
};

// PEFT's target_modules semantics for one module name: a list matches a name equal to an
// entry or ending in "." + entry; a single string is a regular expression the whole name must
// match (std::regex, ECMAScript: PEFT's patterns such as ".*\\.(query|value)" read the same).
bool lora_target_matches(const std::string& name, const std::vector<std::string>& targets, bool regex);

// Whether a parameter (or state-dict key) is one of an adapter's factors: "...lora_A..." or
// "...lora_B..." as above, the names PEFT's adapter files hold.
bool is_lora_factor_name(const std::string& name);

// Which layers get adapters and what else trains (PEFT's LoraConfig).
struct LoraTargets {
  std::vector<std::string> modules;  // target_modules: names/suffixes, or one regex
  bool regex = false;
  std::vector<std::string> modules_to_save;  // trained in full (the task head), same matching
  std::string bias = "none";                 // none | all | lora_only: which biases train
  // PEFT's reading of a saved adapter: a modules_to_save entry that matches nothing is
  // skipped (for a classifier PEFT lists both head names, "classifier" and "score"); a
  // config's own entries must match.
  bool skip_unmatched_to_save = false;
};

// Adds an adapter to every targeted Linear under `root` and freezes every parameter but the
// adapters', the modules_to_save' and the biases `bias` names. Returns the adapted layers.
// Errors (prefixed "lora.target_modules..." / "lora.modules_to_save...") name a target that
// matches no module, or matches one that is not a Linear.
std::vector<std::string> apply_lora(Module& root, const LoraSettings& settings, const LoraTargets& targets);

}  // namespace lb::nn
