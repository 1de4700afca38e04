// A PEFT LoRA adapter directory as model.pretrained (what `leanback export` writes for a LoRA
// run, and what peft's save_pretrained writes): adapter_config.json + adapter_model.safetensors
// and no config.json. As PeftModel.from_pretrained(base, DIR): the base is the directory's
// base_model_name_or_path, the adapters' settings are its adapter_config.json, and the saved
// adapters (and modules_to_save, such as the task head) are loaded onto the adapted base.
#pragma once
#include <string>
#include <vector>

#include "lb/nn/module.h"
#include "lb/train/config.h"

namespace lb::train {

// Whether `dir` holds a PEFT adapter (adapter_config.json, no config.json).
bool is_peft_adapter_dir(const std::string& dir);

// For a config whose model.pretrained is an adapter directory: model.adapter = that
// directory, model.pretrained = its base, the lora section from adapter_config.json. Errors
// name the file and key: another peft_type, settings leanback does not implement (rsLoRA,
// DoRA, fan_in_fan_out, per-layer ranks or layers), a base that is not a local directory, and
// a lora section given as well (the adapter defines it). Does nothing for other configs.
void resolve_peft_adapter(Config& config);

// Loads DIR/adapter_model.safetensors (keys "base_model.model.<name>") onto `model`, which
// has its adapters already (apply_lora with the adapter's settings). Errors name the file: a
// tensor that matches no parameter, an adapter factor the file lacks, a shape that differs.
// Returns the parameters it loaded.
std::vector<std::string> load_peft_adapter(nn::Module& model, const std::string& dir);

}  // namespace lb::train
