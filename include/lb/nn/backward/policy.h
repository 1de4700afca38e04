// Which layers get which backward strategy. Config (JSON):
//   {
//     "default": {"type": "vanilla"},
//     "rules": [{"match": "bert.encoder.layer.11.*", "type": "instant", "epsilon": 0.9}, ...],
//     "strategies": {"instant": {...settings}, "hot": {...settings}},   // used by override
//     "compressible": ["*"], "exclude": ["*classifier*", "*pooler*", "*embeddings*"]
//   }
// Rules match dotted module names (globs, first match wins); unmatched layers get "default".
// A per-run override (the CLI's --strategy NAME) applies NAME, with the settings from
// "strategies", to every trainable layer that is compressible (matches "compressible" and
// no "exclude" glob); other layers keep what the rules say. Layers whose weight is frozen
// always run vanilla: they keep nothing for g_w anyway.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/strategy.h"
#include "lb/nn/module.h"

namespace lb::nn::backward {

// A strategy setting as parsed: the object as written ({"type": ..., settings}) and the typed
// prototype built from it (validated once); a layer's strategy is a clone of the prototype.
struct StrategySetting {
  nlohmann::json spec;
  std::shared_ptr<const Strategy> prototype;
  // Parses and validates j; errors name `path`.
  static StrategySetting parse(const nlohmann::json& j, const std::string& path);
};

// One row of the plan: which strategy a layer gets and why.
struct PlanEntry {
  std::string layer;   // dotted module name
  std::string kind;    // "Linear" | "Conv2d"
  nlohmann::json spec; // the strategy object applied ({"type": ...})
  std::string reason;  // "backward.rules[1] 'bert.encoder.*'", "backward.default", "--strategy hot", "frozen", ...
  std::shared_ptr<const Strategy> prototype;  // what the layer's strategy is cloned from
  // A LoRA adapter on the layer (lb/nn/lora.h): {"r", "alpha", "dropout"}; null: none. Its
  // factors run the plain ops; the strategy is the frozen base's.
  nlohmann::json lora;
};

struct Plan {
  std::vector<PlanEntry> layers;
  // Per rule (in order): its glob and how many Linear/Conv2d layers it decided.
  std::vector<std::pair<std::string, int64_t>> rule_matches;
  std::string table() const;  // printable layer -> strategy -> reason table with rule counts
  nlohmann::json to_json() const;
};

class Policy {
 public:
  Policy() = default;  // everything vanilla
  static Policy from_json(const nlohmann::json& j, const std::string& path);

  // Assigns a fresh strategy (a clone of its setting's prototype) to every Linear and Conv2d
  // under `root`.
  // override_type: "" or a strategy type. Returns the strategies by layer name.
  std::vector<std::shared_ptr<Strategy>> apply(Module& root, const std::string& override_type = "") const;

  bool compressible(const std::string& layer) const;

  // The section as a run uses it, for the resolved config.json: every strategy spec with all
  // its settings (defaults filled in, as the strategy reports them), and a "strategies"
  // entry for every type (what --strategy TYPE applies). Parses back to the same policy.
  nlohmann::json resolved_json() const;

  // What apply() would assign, with reasons. Strict, for configs: a rule that decides no
  // Linear/Conv2d layer (it matches nothing, only other module types, or only layers an
  // earlier rule took) is an error naming the rule and what it matched.
  Plan plan(Module& root, const std::string& override_type = "") const;

  // The section as it was given (from_json's argument; {} for the default policy).
  const nlohmann::json& source_json() const { return source_; }

 private:
  // The one matcher behind plan() and apply(): every Linear/Conv2d under `root`, in module
  // order, with the spec it gets and why. With `plan`, its rule_matches count the layers each
  // rule decided, and `others` gets, per rule, up to three other modules it matched.
  std::vector<std::pair<Module*, PlanEntry>> decide(Module& root, const std::string& override_type, Plan* plan,
                                                    std::vector<std::vector<std::string>>* others) const;

  struct Rule {
    std::string match;
    StrategySetting setting;  // spec includes "type"
  };
  // The setting --strategy TYPE applies: the "strategies" entry, else TYPE's defaults.
  StrategySetting override_setting(const std::string& type) const;

  StrategySetting default_ = StrategySetting::parse({{"type", "vanilla"}}, "backward.default");
  std::vector<Rule> rules_;
  std::map<std::string, StrategySetting> strategies_;
  std::vector<std::string> compressible_ = {"*"};
  std::vector<std::string> exclude_ = {"*classifier*", "*pooler*", "*embeddings*", "*head*"};
  std::string path_ = "backward";
  nlohmann::json source_ = nlohmann::json::object();
};

}  // namespace lb::nn::backward
