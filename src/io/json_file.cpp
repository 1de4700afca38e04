// parse_json / read_json_file (see json_file.h).
#include "lb/io/json_file.h"

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
  }
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
