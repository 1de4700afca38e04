// Policy: rule matching and assignment of strategies to layers.
#include "lb/nn/backward/policy.h"

#include "lb/core/json_reader.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/layers.h"

#include <iomanip>
#include <map>
#include <sstream>

namespace lb::nn::backward {

namespace {
std::vector<std::string> string_list(const nlohmann::json& v, const std::string& path) {
  LB_CHECK(v.is_array(), path, ": expected a list of glob strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    LB_CHECK(v[i].is_string(), path, "[", i, "]: expected a string");
    out.push_back(v[i].get<std::string>());
  }
  return out;
}
}  // namespace

StrategySetting StrategySetting::parse(const nlohmann::json& j, const std::string& path) {
  return {j, std::shared_ptr<const Strategy>(make_strategy(j, path))};
}

StrategySetting Policy::override_setting(const std::string& type) const {
  const auto it = strategies_.find(type);
  return it != strategies_.end() ? it->second : StrategySetting::parse({{"type", type}}, "--strategy " + type);
}

Policy Policy::from_json(const nlohmann::json& j, const std::string& path) {
  Policy p;
  p.path_ = path;
  p.source_ = j;
  JsonReader r(j, path);
  if (r.has("default")) p.default_ = StrategySetting::parse(r.raw("default"), path + ".default");
  if (r.has("strategies")) {
    const auto& s = r.raw("strategies");
    LB_CHECK(s.is_object(), path, ".strategies: expected an object of {type: settings}");
    for (auto it = s.begin(); it != s.end(); ++it) {
      nlohmann::json spec = it.value();
      LB_CHECK(spec.is_object(), path, ".strategies.", it.key(), ": expected an object");
      LB_CHECK(!spec.contains("type") || spec["type"] == it.key(), path, ".strategies.", it.key(),
               ".type: must be '", it.key(), "' or absent");
      spec["type"] = it.key();
      p.strategies_[it.key()] = StrategySetting::parse(spec, path + ".strategies." + it.key());
    }
  }
  if (r.has("rules")) {
    const auto& rules = r.raw("rules");
    LB_CHECK(rules.is_array(), path, ".rules: expected a list of {\"match\": glob, \"type\": ...}");
    for (size_t i = 0; i < rules.size(); ++i) {
      const std::string rp = path + ".rules[" + std::to_string(i) + "]";
      LB_CHECK(rules[i].is_object() && rules[i].contains("match") && rules[i]["match"].is_string(),
               rp, ": expected {\"match\": \"glob\", \"type\": ...}");
      nlohmann::json spec = rules[i];
      spec.erase("match");
      p.rules_.push_back({rules[i]["match"].get<std::string>(), StrategySetting::parse(spec, rp)});
    }
  }
  if (r.has("compressible")) p.compressible_ = string_list(r.raw("compressible"), path + ".compressible");
  if (r.has("exclude")) p.exclude_ = string_list(r.raw("exclude"), path + ".exclude");
  r.finish();
  return p;
}

nlohmann::json Policy::resolved_json() const {
  const auto full = [](const StrategySetting& s) {
    nlohmann::json j = s.prototype->hyperparams();
    j["type"] = s.spec.at("type");
    return j;
  };
  nlohmann::json rules = nlohmann::json::array();
  for (const Rule& rule : rules_) {
    nlohmann::json r = {{"match", rule.match}};
    r.update(full(rule.setting));
    rules.push_back(r);
  }
  nlohmann::json strategies = nlohmann::json::object();
  for (const auto& type : strategy_types()) strategies[type] = full(override_setting(type));
  return {{"default", full(default_)}, {"rules", rules}, {"strategies", strategies},
          {"compressible", compressible_}, {"exclude", exclude_}};
}

bool Policy::compressible(const std::string& layer) const {
  bool in = false;
  for (const auto& g : compressible_) in = in || glob_match(g, layer);
  for (const auto& g : exclude_) in = in && !glob_match(g, layer);
  return in;
}

std::vector<std::pair<Module*, PlanEntry>> Policy::decide(Module& root, const std::string& override_type, Plan* plan,
                                                          std::vector<std::vector<std::string>>* others) const {
  StrategySetting override;
  if (!override_type.empty()) override = override_setting(override_type);
  static const StrategySetting exact = StrategySetting::parse({{"type", "vanilla"}}, "vanilla");
  if (plan)
    for (const auto& r : rules_) plan->rule_matches.emplace_back(r.match, 0);
  if (others) others->assign(rules_.size(), {});
  std::vector<std::pair<Module*, PlanEntry>> out;
  for (auto& [name, m] : root.named_modules()) {
    auto* lin = dynamic_cast<Linear*>(m);
    auto* conv = dynamic_cast<Conv2d*>(m);
    if (!lin && !conv) {
      if (others)
        for (size_t i = 0; i < rules_.size(); ++i)
          if (!name.empty() && glob_match(rules_[i].match, name) && (*others)[i].size() < 3)
            (*others)[i].push_back(name + " (" + m->type_name() + ")");
      continue;
    }
    PlanEntry e;
    e.layer = name;
    e.kind = lin ? "Linear" : "Conv2d";
    StrategySetting setting = default_;
    e.reason = path_ + ".default";
    for (size_t i = 0; i < rules_.size(); ++i)
      if (glob_match(rules_[i].match, name)) {
        setting = rules_[i].setting;
        e.reason = path_ + ".rules[" + std::to_string(i) + "] '" + rules_[i].match + "'";
        if (plan) ++plan->rule_matches[i].second;
        break;
      }
    if (!override_type.empty()) {
      if (compressible(name)) {
        setting = override;
        e.reason = "--strategy " + override_type;
      } else if (e.reason == path_ + ".default") {
        e.reason += " (not compressible: " + path_ + ".exclude)";
      }
    }
    // Frozen layers keep nothing for g_w anyway; grouped convs stay exact (docs/algorithms.md).
    const Tensor& weight = lin ? lin->weight() : conv->weight();
    const bool exact_already = setting.spec.value("type", "") == "vanilla";
    if (!weight.requires_grad() && !exact_already && lin && setting.prototype->compresses_gx()) {
      e.reason += "; frozen weight: g_x only, on " + setting.spec.value("type", "?") + "'s path";
    } else if (!weight.requires_grad() && !exact_already) {
      setting = exact;
      e.reason = "frozen weight (nothing to keep for g_w)";
    } else if (conv && conv->args().groups != 1 && !exact_already) {
      setting = exact;
      e.reason = "grouped convolution (stays exact)";
    }
    e.spec = setting.spec;
    e.prototype = setting.prototype;
    if (lin && lin->has_lora())
      e.lora = {{"r", lin->lora_settings().r}, {"alpha", lin->lora_settings().alpha},
                {"dropout", lin->lora_settings().dropout}};
    out.emplace_back(m, std::move(e));
  }
  return out;
}

Plan Policy::plan(Module& root, const std::string& override_type) const {
  Plan plan;
  std::vector<std::vector<std::string>> other_matches;
  for (auto& [m, e] : decide(root, override_type, &plan, &other_matches)) plan.layers.push_back(std::move(e));
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (plan.rule_matches[i].second > 0) continue;
    std::string seen;
    for (const auto& o : other_matches[i]) seen += (seen.empty() ? "" : ", ") + o;
    LB_FAIL(path_, ".rules[", i, "] (match '", rules_[i].match, "') decides no Linear/Conv2d layer: ",
            seen.empty() ? std::string("it matches no module name (names look like '") +
                               (plan.layers.empty() ? std::string("") : plan.layers.front().layer) + "')"
                         : "it matches only " + seen +
                               ", which have no pluggable backward",
            " — or an earlier rule already took every layer it matches");
  }
  return plan;
}

std::string Plan::table() const {
  size_t w = 5;
  for (const auto& e : layers) w = std::max(w, e.layer.size());
  std::ostringstream os;
  os << std::left << std::setw(static_cast<int>(w) + 2) << "layer" << std::setw(8) << "kind"
     << std::setw(10) << "strategy" << "reason\n";
  for (const auto& e : layers) {
    nlohmann::json settings = e.spec;
    settings.erase("type");
    os << std::left << std::setw(static_cast<int>(w) + 2) << e.layer << std::setw(8) << e.kind
       << std::setw(10) << e.spec.value("type", "?") << e.reason;
    if (!settings.empty()) os << "  " << settings.dump();
    if (!e.lora.is_null())
      os << "; + LoRA adapter r " << e.lora["r"] << ", alpha " << e.lora["alpha"].get<double>()
         << " (lora_A, lora_B trained; plain ops)";
    os << "\n";
  }
  std::map<std::string, int64_t> counts;
  for (const auto& e : layers) ++counts[e.spec.value("type", "?")];
  os << layers.size() << " layers:";
  for (const auto& [t, n] : counts) os << " " << t << " " << n;
  os << "\n";
  for (size_t i = 0; i < rule_matches.size(); ++i)
    os << "rule " << i << " '" << rule_matches[i].first << "' matched " << rule_matches[i].second
       << " layer(s)\n";
  return os.str();
}

nlohmann::json Plan::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& e : layers) {
    nlohmann::json x = {{"layer", e.layer}, {"kind", e.kind}, {"strategy", e.spec}, {"reason", e.reason}};
    if (!e.lora.is_null()) x["lora"] = e.lora;
    j.push_back(x);
  }
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& [g, n] : rule_matches) rules.push_back({{"match", g}, {"layers", n}});
  return {{"layers", j}, {"rules", rules}};
}

std::vector<std::shared_ptr<Strategy>> Policy::apply(Module& root,
                                                     const std::string& override_type) const {
  std::vector<std::shared_ptr<Strategy>> out;
  int64_t id = 0;
  for (auto& [m, e] : decide(root, override_type, nullptr, nullptr)) {
    std::shared_ptr<Strategy> s = e.prototype->clone();  // the setting's typed prototype
    s->set_layer(e.layer, id++, e.kind == "Conv2d");
    set_backward_strategy(*m, s);
    out.push_back(s);
  }
  return out;
}

}  // namespace lb::nn::backward
