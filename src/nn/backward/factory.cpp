// Strategy factory: one entry per type. (An explicit table rather than static
// self-registration, which a static library would silently drop.)
#include "lb/nn/backward/factory.h"

#include <functional>
#include <map>

#include "lb/core/json_reader.h"
#include "lb/nn/backward/hot.h"
#include "lb/nn/backward/instant.h"
#include "lb/nn/backward/vanilla.h"

namespace lb::nn::backward {

namespace {
// The table: a new strategy adds its line here (or, outside the library, registers it).
std::map<std::string, StrategyBuilder>& builders() {
  static std::map<std::string, StrategyBuilder> m = {
      {"vanilla", [](JsonReader&) { return std::make_unique<Vanilla>(); }},
      {"hot", [](JsonReader& r) { return std::make_unique<Hot>(HotSettings::from_json(r)); }},
      {"instant", [](JsonReader& r) { return std::make_unique<Instant>(Instant::parse(r)); }},
  };
  return m;
}
}  // namespace

void register_strategy_type(const std::string& type, StrategyBuilder build) {
  LB_CHECK(!type.empty() && build, "register_strategy_type: a type needs a name and a builder");
  LB_CHECK(builders().emplace(type, std::move(build)).second, "register_strategy_type: '", type,
           "' is a strategy type already");
}

std::vector<std::string> strategy_types() {
  std::vector<std::string> v;
  for (const auto& [k, _] : builders()) v.push_back(k);
  return v;
}

std::unique_ptr<Strategy> make_strategy(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  if (!r.has("type")) {
    std::string valid;
    for (const auto& t : strategy_types()) valid += (valid.empty() ? "" : ", ") + t;
    LB_FAIL(path, ": missing \"type\"; choose one of: ", valid);
  }
  const std::string type = r.choice("type", "", strategy_types());
  auto s = builders().at(type)(r);
  r.finish();
  return s;
}

}  // namespace lb::nn::backward
