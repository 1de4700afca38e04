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
using Builder = std::function<std::unique_ptr<Strategy>(JsonReader&)>;

const std::map<std::string, Builder>& builders() {
  static const std::map<std::string, Builder> m = {
      {"vanilla", [](JsonReader&) { return std::make_unique<Vanilla>(); }},
      {"hot", [](JsonReader& r) { return std::make_unique<Hot>(HotSettings::from_json(r)); }},
      {"instant", [](JsonReader& r) { return std::make_unique<Instant>(Instant::parse(r)); }},
  };
  return m;
}
}  // namespace

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
