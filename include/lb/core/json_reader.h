// Strict reading of a JSON object from a config: typed getters with defaults and ranges,
// and finish() rejecting keys nobody asked for. Every error names the JSON path
// ("model.backward.rules[2].epsilon") and, for unknown keys and choices, the valid ones.
#pragma once
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lb {

class JsonReader {
 public:
  JsonReader(const nlohmann::json& j, std::string path);
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;
  double number(const std::string& key, double def, double lo, double hi);
  int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  bool boolean(const std::string& key, bool def);
  std::string string(const std::string& key, const std::string& def);
  std::string choice(const std::string& key, const std::string& def,
                     const std::vector<std::string>& valid);
  // The raw value (marks the key as known); null if absent.
  const nlohmann::json& raw(const std::string& key);
  void allow(const std::string& key) { known_.insert(key); }  // accepted and ignored
  // Throws on any key not read or allowed, listing the valid keys.
  void finish() const;

 private:
  const nlohmann::json& j_;
  std::string path_;
  std::set<std::string> known_;
};

}  // namespace lb
