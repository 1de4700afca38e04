// JsonReader (see json_reader.h).
#include "lb/core/json_reader.h"

#include <sstream>

#include "lb/core/error.h"

namespace lb {

namespace {
const nlohmann::json& null_json() {
  static const nlohmann::json n;
  return n;
}
}  // namespace

JsonReader::JsonReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {
  LB_CHECK(j.is_object(), path_, ": expected a JSON object, got ", j.dump());
}

bool JsonReader::has(const std::string& key) const { return j_.contains(key); }

const nlohmann::json& JsonReader::raw(const std::string& key) {
  known_.insert(key);
  return j_.contains(key) ? j_.at(key) : null_json();
}

double JsonReader::number(const std::string& key, double def, double lo, double hi) {
  const auto& v = raw(key);
  if (v.is_null()) return def;
  LB_CHECK(v.is_number(), path_, ".", key, ": expected a number, got ", v.dump());
  const double x = v.get<double>();
  LB_CHECK(x >= lo && x <= hi, path_, ".", key, ": ", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

int64_t JsonReader::integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  const auto& v = raw(key);
  if (v.is_null()) return def;
  LB_CHECK(v.is_number_integer(), path_, ".", key, ": expected an integer, got ", v.dump());
  const int64_t x = v.get<int64_t>();
  LB_CHECK(x >= lo && x <= hi, path_, ".", key, ": ", x, " is out of range [", lo, ", ", hi, "]");
  return x;
}

bool JsonReader::boolean(const std::string& key, bool def) {
  const auto& v = raw(key);
  if (v.is_null()) return def;
  LB_CHECK(v.is_boolean(), path_, ".", key, ": expected true or false, got ", v.dump());
  return v.get<bool>();
}

std::string JsonReader::string(const std::string& key, const std::string& def) {
  const auto& v = raw(key);
  if (v.is_null()) return def;
  LB_CHECK(v.is_string(), path_, ".", key, ": expected a string, got ", v.dump());
  return v.get<std::string>();
}

std::string JsonReader::choice(const std::string& key, const std::string& def,
                               const std::vector<std::string>& valid) {
  const std::string s = string(key, def);
  for (const auto& v : valid)
    if (v == s) return s;
  std::ostringstream os;
  for (size_t i = 0; i < valid.size(); ++i) os << (i ? ", " : "") << valid[i];
  LB_FAIL(path_, ".", key, ": '", s, "' is not valid; choose one of: ", os.str());
}

void JsonReader::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    if (known_.count(it.key())) continue;
    std::ostringstream os;
    for (auto k = known_.begin(); k != known_.end(); ++k) os << (k == known_.begin() ? "" : ", ") << *k;
    LB_FAIL(path_, ": unknown key '", it.key(), "'; valid keys: ", os.str());
  }
}

}  // namespace lb
