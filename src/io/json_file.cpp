// parse_json / read_json_file (see json_file.h).
#include "lb/io/json_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lb/core/error.h"

namespace lb::io {

namespace {
struct TooDeep {};

// Byte offset -> "line:column" (1-based) of `text`.
std::string position(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  const size_t upto = std::min(byte > 0 ? byte - 1 : 0, text.size());
  for (size_t i = 0; i < upto; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}
}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& source, int max_depth) {
  LB_CHECK(text.size() <= kMaxJsonBytes, source, ": ", text.size(), " bytes of JSON exceed the limit of ",
           kMaxJsonBytes, " bytes");
  // nlohmann's parser is iterative; the callback stops it before the document gets deep.
  const auto limit = [max_depth](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    if (depth > max_depth) throw TooDeep{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, limit);
  } catch (const TooDeep&) {
    LB_FAIL(source, ": JSON nested deeper than ", max_depth, " levels");
  } catch (const nlohmann::json::parse_error& e) {
    LB_FAIL(source, ":", position(text, e.byte), ": invalid JSON: ", e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range 406: a number past double's range
    LB_FAIL(source, ": invalid JSON: ", e.what());
  }
}

namespace {
const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected a JSON object, got ", j.type_name());
  LB_CHECK(j.contains(key), path, ".", key, ": missing");
  return j.at(key);
}
}  // namespace

int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& path) {
  const auto& v = field(j, key, path);
  const bool fits = v.is_number_integer() &&
                    (!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX));
  LB_CHECK(fits && v.get<int64_t>() >= lo && v.get<int64_t>() <= hi, path, ".", key, ": expected an integer in [",
           lo, ", ", hi, "], got ", v.dump());
  return v.get<int64_t>();
}

uint64_t json_uint(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto& v = field(j, key, path);
  LB_CHECK(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0), path, ".", key,
           ": expected a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

double json_number(const nlohmann::json& j, const char* key, const std::string& path) {
  const auto& v = field(j, key, path);
  LB_CHECK(v.is_number() && std::isfinite(v.get<double>()), path, ".", key, ": expected a finite number, got ",
           v.dump());
  return v.get<double>();
}

nlohmann::json read_json_file(const std::string& path, int max_depth) {
  namespace fs = std::filesystem;
  std::error_code ec;
  LB_CHECK(fs::is_regular_file(path, ec), path, ": no such file");
  const auto size = fs::file_size(path, ec);
  LB_CHECK(!ec && size <= kMaxJsonBytes, path, ": ", size, " bytes of JSON exceed the limit of ", kMaxJsonBytes,
           " bytes");
  std::ifstream in(path, std::ios::binary);
  LB_CHECK(in, path, ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_json(ss.str(), path, max_depth);
}

}  // namespace lb::io
