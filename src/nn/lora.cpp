// LoRA targets and their application (see lora.h); the adapter itself is Linear's (layers.cpp).
#include "lb/nn/lora.h"

#include <algorithm>
#include <regex>

#include "lb/core/error.h"
#include "lb/nn/layers.h"

namespace lb::nn {

bool is_lora_factor_name(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

bool lora_target_matches(const std::string& name, const std::vector<std::string>& targets, bool regex) {
  if (regex) return !targets.empty() && std::regex_match(name, std::regex(targets.front()));
  for (const auto& t : targets)
    if (name == t || (name.size() > t.size() && name.compare(name.size() - t.size() - 1, t.size() + 1, "." + t) == 0))
      return true;
  return false;
}

namespace {

// The modules `targets` (entry i, or the regex) match, with the error for none.
std::vector<std::pair<std::string, Module*>> matched(Module& root, const std::vector<std::string>& targets, bool regex,
                                                     size_t i, const std::string& path) {
  std::vector<std::pair<std::string, Module*>> out;
  const std::vector<std::string> one = regex ? targets : std::vector<std::string>{targets[i]};
  for (const auto& [name, m] : root.named_modules())
    if (!name.empty() && dynamic_cast<LoraFactor*>(m) == nullptr && lora_target_matches(name, one, regex))
      out.emplace_back(name, m);
  std::string example;
  for (const auto& [name, m] : root.named_modules())
    if (example.empty() && dynamic_cast<Linear*>(m) != nullptr) example = name;
  LB_CHECK(!out.empty(), path, " '", one.front(), "' matches no module of this model (",
           regex ? "a regular expression the whole module name must match" : "a module name or its last parts",
           "; Linear layers are named like '", example, "')");
  return out;
}

}  // namespace

std::vector<std::string> apply_lora(Module& root, const LoraSettings& settings, const LoraTargets& targets) {
  LB_CHECK(!targets.modules.empty(), "lora.target_modules: empty; name the Linear layers to adapt");
  std::vector<std::pair<std::string, Linear*>> layers;
  for (size_t i = 0; i < (targets.regex ? 1 : targets.modules.size()); ++i) {
    const std::string path = targets.regex ? "lora.target_modules" : "lora.target_modules[" + std::to_string(i) + "]";
    for (const auto& [name, m] : matched(root, targets.modules, targets.regex, i, path)) {
      auto* lin = dynamic_cast<Linear*>(m);
      LB_CHECK(lin != nullptr, path, " '", targets.modules[i], "' matches '", name, "', a ", m->type_name(),
               "; LoRA adapts Linear layers only");
      if (std::none_of(layers.begin(), layers.end(), [&](const auto& l) { return l.second == lin; }))
        layers.emplace_back(name, lin);
    }
  }
  root.freeze("*");
  std::vector<std::string> names;
  for (auto& [name, lin] : layers) {
    if (!lin->has_lora()) lin->add_lora(settings);
    root.unfreeze(name + ".lora_A.weight");
    root.unfreeze(name + ".lora_B.weight");
    if (targets.bias == "lora_only" && lin->bias().defined()) root.unfreeze(name + ".bias");
    names.push_back(name);
  }
  for (size_t i = 0; i < targets.modules_to_save.size(); ++i) {
    const std::string path = "lora.modules_to_save[" + std::to_string(i) + "]";
    if (targets.skip_unmatched_to_save) {
      const auto modules = root.named_modules();
      if (std::none_of(modules.begin(), modules.end(), [&](const auto& nm) {
            return !nm.first.empty() && lora_target_matches(nm.first, {targets.modules_to_save[i]}, false);
          }))
        continue;
    }
    for (const auto& [name, m] : matched(root, targets.modules_to_save, false, i, path)) {
      LB_CHECK(!m->named_parameters().empty(), path, " '", targets.modules_to_save[i], "' matches '", name, "', a ",
               m->type_name(), " with no parameters to train");
      root.unfreeze(name + ".*");
    }
  }
  if (targets.bias == "all") root.unfreeze("*.bias");
  return names;
}

}  // namespace lb::nn
