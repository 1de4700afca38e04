// A PEFT LoRA adapter directory as model.pretrained (see peft_adapter.h).
#include "lb/train/export/peft_adapter.h"
#include "lb/train/export/model_name.h"

#include <filesystem>
#include <map>
#include <set>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "lb/nn/lora.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "base_model.model.";

bool is_file(const fs::path& p) {
  std::error_code ec;  // a path the system refuses is no adapter
  return fs::is_regular_file(p, ec);
}

// A key whose value, when present and not null, must be `expected` (PEFT's default).
void check_default(const nlohmann::json& ac, const std::string& file, const char* key, const nlohmann::json& expected,
                   const char* what) {
  if (!ac.contains(key) || ac.at(key).is_null() || ac.at(key) == expected) return;
  if (expected.is_object() && ac.at(key).is_object() && ac.at(key).empty()) return;
  LB_FAIL(file, ": ", key, " is ", ac.at(key).dump(), ": ", what, " is not implemented (leanback's LoRA is "
          "PEFT's default: one rank and alpha for every adapted layer, scale alpha / r)");
}

// base_model_name_or_path as a directory here: a path (as given, or relative to the adapter's
// directory), or a Hugging Face name whose copy tools/fetch_pretrained.sh put under
// $LEANBACK_HOME/models (model_name.h).
std::string local_base(const std::string& base, const std::string& adapter_dir, const std::string& file) {
  std::error_code ec;
  if (fs::is_directory(base, ec)) return base;
  const fs::path beside = fs::path(adapter_dir) / base;
  if (fs::path(base).is_relative() && fs::is_directory(beside, ec)) return beside.lexically_normal().string();
  if (const std::string local = local_model_for(base); !local.empty()) return local;
  LB_FAIL(file, ": base_model_name_or_path '", base, "' is not a directory here, nor a model fetched into "
          "$LEANBACK_HOME/models (leanback loads local Hugging Face directories: download the base, give its path "
          "there, or fetch it with tools/fetch_pretrained.sh)");
}

}  // namespace

bool is_peft_adapter_dir(const std::string& dir) {
  if (dir.empty()) return false;
  return is_file(fs::path(dir) / "adapter_config.json") && !is_file(fs::path(dir) / "config.json");
}

void resolve_peft_adapter(Config& c) {
  if (!c.model.adapter.empty() || !is_peft_adapter_dir(c.model.pretrained)) return;
  const std::string dir = c.model.pretrained;
  const std::string file = (fs::path(dir) / "adapter_config.json").string();
  const nlohmann::json ac = io::read_json_file(file);
  LB_CHECK(ac.is_object(), file, ": expected a JSON object (PEFT's adapter_config.json)");
  LB_CHECK(ac.value("peft_type", nlohmann::json()) == "LORA", file, ": peft_type is ",
           ac.value("peft_type", nlohmann::json()).dump(), "; leanback loads LoRA adapters (\"LORA\") only");
  LB_CHECK(!c.lora.enabled, "lora: model.pretrained (", dir, ") is a PEFT adapter whose adapter_config.json "
           "defines LoRA; remove the lora section, or set model.pretrained to the base model to train new adapters");
  check_default(ac, file, "use_rslora", false, "rank-stabilised LoRA");
  check_default(ac, file, "use_dora", false, "DoRA");
  check_default(ac, file, "fan_in_fan_out", false, "a transposed (Conv1D) base weight");
  check_default(ac, file, "layers_to_transform", nullptr, "adapting some layers' modules only");
  check_default(ac, file, "rank_pattern", nlohmann::json::object(), "a rank per layer");
  check_default(ac, file, "alpha_pattern", nlohmann::json::object(), "an alpha per layer");
  const nlohmann::json base_j = ac.value("base_model_name_or_path", nlohmann::json());
  LB_CHECK(base_j.is_string() && !base_j.get<std::string>().empty(), file,
           ": base_model_name_or_path: expected the base model's directory, got ", base_j.dump());
  const std::string base = local_base(base_j.get<std::string>(), dir, file);
  // The adapter's settings, read as the lora section (PEFT's names to ours).
  nlohmann::json lora = {{"r", ac.value("r", nlohmann::json(8))},
                         {"alpha", ac.value("lora_alpha", nlohmann::json(8))},
                         {"dropout", ac.value("lora_dropout", nlohmann::json(0.0))},
                         {"bias", ac.value("bias", nlohmann::json("none"))}};
  for (const char* k : {"target_modules", "modules_to_save"})
    if (ac.contains(k) && !ac.at(k).is_null()) lora[k] = ac.at(k);
  try {
    c.lora = LoraSection::from_json(lora);
  } catch (const Error& e) {
    throw Error(file + " (PEFT's r, lora_alpha, lora_dropout, target_modules, modules_to_save, bias): " + e.what());
  }
  c.lora.targets.skip_unmatched_to_save = true;
  c.model.adapter = dir;
  c.model.pretrained = base;
}

std::vector<std::string> load_peft_adapter(nn::Module& model, const std::string& dir) {
  const std::string file = (fs::path(dir) / "adapter_model.safetensors").string();
  LB_CHECK(is_file(file), file, ": missing (a PEFT adapter directory holds adapter_config.json and "
           "adapter_model.safetensors)");
  const auto saved = io::load_safetensors(file);
  io::check_finite(saved);
  std::map<std::string, Tensor> weights;
  for (const auto& [k, t] : saved.tensors) {
    LB_CHECK(k.rfind(kPrefix, 0) == 0, file, ": tensor '", k, "' is not under ", kPrefix,
             " (PEFT's names for the adapted model's parameters)");
    weights[k.substr(std::string(kPrefix).size())] = t;
  }
  const auto params = model.named_parameters();
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    names.insert(name);
    const bool factor = nn::is_lora_factor_name(name);
    LB_CHECK(!factor || weights.count(name), file, ": has no tensor for the adapter factor '", kPrefix, name,
             "' (adapter_config.json's target_modules adapt that layer)");
  }
  for (const auto& [name, t] : weights)
    LB_CHECK(names.count(name), file, ": tensor '", kPrefix, name, "' matches no parameter of the adapted model");
  try {
    model.load_state_dict(weights, /*strict=*/false);
  } catch (const Error& e) {
    throw Error(file + ": " + e.what());
  }
  std::vector<std::string> loaded;
  for (const auto& [name, t] : weights) loaded.push_back(name);
  return loaded;
}

}  // namespace lb::train
