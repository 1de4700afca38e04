// Reading Hugging Face config.json values with errors that name the JSON path.
// Absent keys keep the default; present keys must have the right type and range. Keys whose
// values would change the model's maths in a way not implemented here (relative position
// embeddings, a causal decoder) are refused, never ignored: the same file would build a
// different model in Hugging Face.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/io/printable.h"
#include "lb/nn/layers.h"

namespace lb::models::hf {

inline int64_t get_int(const nlohmann::json& j, const std::string& path, const char* key,
                       int64_t def, int64_t min_value) {
  if (!j.contains(key)) return def;
  const auto& v = j.at(key);
  LB_CHECK(v.is_number_integer(), path, ".", key, ": expected an integer, got ", v.dump());
  LB_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), path, ".", key,
           ": ", v.dump(), " is out of range");
  const int64_t x = v.get<int64_t>();
  LB_CHECK(x >= min_value, path, ".", key, ": must be >= ", min_value, ", got ", x);
  return x;
}

inline double get_num(const nlohmann::json& j, const std::string& path, const char* key,
                      double def, double lo, double hi) {
  if (!j.contains(key) || j.at(key).is_null()) return def;
  const auto& v = j.at(key);
  LB_CHECK(v.is_number(), path, ".", key, ": expected a number, got ", v.dump());
  const double x = v.get<double>();
  LB_CHECK(x >= lo && x <= hi, path, ".", key, ": must be in [", lo, ", ", hi, "], got ", x);
  return x;
}

// num_labels, or the size of id2label when only that is given (as HF does).
inline int64_t get_num_labels(const nlohmann::json& j, const std::string& path, int64_t def) {
  if (j.contains("num_labels")) return get_int(j, path, "num_labels", def, 1);
  if (j.contains("id2label") && j.at("id2label").is_object() && !j.at("id2label").empty())
    return static_cast<int64_t>(j.at("id2label").size());
  return def;
}

// hidden_act, validated against the activations we implement.
inline std::string get_activation(const nlohmann::json& j, const std::string& path,
                                  const std::string& def) {
  if (!j.contains("hidden_act")) return def;
  LB_CHECK(j.at("hidden_act").is_string(), path, ".hidden_act: expected a string, got ", j.at("hidden_act").dump());
  const std::string name = j.at("hidden_act").get<std::string>();
  try {
    nn::activation_from_name(name);
  } catch (const Error&) {  // its message names our source file, not the user's
    LB_FAIL(path, ".hidden_act: '", io::printable(name),
            "' is not implemented; valid: relu, gelu, gelu_new, gelu_pytorch_tanh, tanh");
  }
  return name;
}

// A string key that must be absent, null or `implemented` (e.g. position_embedding_type
// "absolute"); `what` says what the others would change.
inline void require_string(const nlohmann::json& j, const std::string& path, const char* key,
                           const std::string& implemented, const char* what) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  const auto& v = j.at(key);
  LB_CHECK(v.is_string(), path, ".", key, ": expected a string, got ", v.dump());
  LB_CHECK(v.get<std::string>() == implemented, path, ".", key, ": '", io::printable(v.get<std::string>()),
           "' is not implemented (", what, "); only '", implemented,
           "' is. HINT: leanback cannot load this model faithfully");
}

// A boolean key that must be absent, null or false (e.g. is_decoder).
inline void require_false(const nlohmann::json& j, const std::string& path, const char* key, const char* what) {
  if (!j.contains(key) || j.at(key).is_null()) return;
  const auto& v = j.at(key);
  LB_CHECK(v.is_boolean(), path, ".", key, ": expected true or false, got ", v.dump());
  LB_CHECK(!v.get<bool>(), path, ".", key, ": true is not implemented (", what,
           "). HINT: leanback cannot load this model faithfully");
}

}  // namespace lb::models::hf
