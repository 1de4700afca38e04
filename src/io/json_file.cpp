// parse_json / read_json_file (see json_file.h).
#include "lb/io/json_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "lb/core/error.h"
#include "lb/io/printable.h"

namespace lb::io {

namespace {
struct TooDeep {};
struct DuplicateKey {};

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

// nlohmann's what() without its "[json.exception.parse_error.101] parse error at line 3,
// column 3: " prefix (the message gives the position itself).
std::string library_detail(const std::string& what) {
  std::string s = what;
  if (s.rfind("[json.exception.", 0) == 0 && s.find("] ") != std::string::npos) s.erase(0, s.find("] ") + 2);
  if (s.rfind("parse error", 0) == 0 && s.find(": ") != std::string::npos) s.erase(0, s.find(": ") + 2);
  return s;
}

// One key set per open object, reused by the next object at the same depth, so the parse
// callback allocates little on the common path (no duplicates).
class KeySets {
 public:
  void open() {
    if (++depth_ > sets_.size()) sets_.emplace_back();
    auto& keys = sets_[depth_ - 1];
    // clear() costs the bucket count: after one big object, many small ones would pay it each.
    if (keys.bucket_count() > 64) keys = {};
    else keys.clear();
  }
  void close() { --depth_; }
  bool insert(const std::string& key) { return sets_[depth_ - 1].insert(key).second; }

 private:
  std::vector<std::unordered_set<std::string>> sets_;
  size_t depth_ = 0;
};

// "/" and "~" in a JSON pointer's reference token (RFC 6901).
std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

struct Duplicate {
  std::string object;  // JSON pointer of the object holding the key ("" = top level)
  std::string key;
  size_t first_line = 0, second_line = 0;
};

// Finds the first duplicated key by scanning `text` again, tracking strings (escapes
// included), nesting and lines: run only once the parser has met a duplicate, so the text
// is valid JSON up to it. Keys compare unescaped ("a" and "\u0061" are the same key).
Duplicate locate_duplicate(const std::string& text) {
  struct Frame {
    bool object;
    std::string pointer;
    std::unordered_map<std::string, size_t> lines;  // key -> line it was first seen on
    std::string key;                                // the current member (objects)
    size_t index = 0;                               // the current element (arrays)
    bool expect_key = true;
  };
  std::vector<Frame> stack;
  size_t line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    switch (const char c = text[i]) {
      case '\n': ++line; break;
      case '{':
      case '[': {
        std::string pointer;
        if (!stack.empty())
          pointer = stack.back().pointer + "/" +
                    (stack.back().object ? pointer_token(stack.back().key) : std::to_string(stack.back().index));
        stack.push_back(Frame{c == '{', std::move(pointer), {}, {}, 0, true});
        break;
      }
      case '}':
      case ']':
        if (!stack.empty()) stack.pop_back();
        break;
      case ',':
        if (!stack.empty() && stack.back().object) stack.back().expect_key = true;
        else if (!stack.empty()) ++stack.back().index;
        break;
      case '"': {
        const size_t start = i;
        for (++i; i < text.size() && text[i] != '"'; ++i)
          if (text[i] == '\\') ++i;
        if (stack.empty() || !stack.back().object || !stack.back().expect_key) break;
        Frame& f = stack.back();
        f.key = nlohmann::json::parse(text.substr(start, i - start + 1)).get<std::string>();
        f.expect_key = false;
        const auto [it, fresh] = f.lines.emplace(f.key, line);
        if (!fresh) return {f.pointer, f.key, it->second, line};
        break;
      }
      default: break;
    }
  }
  return {};
}
}  // namespace

nlohmann::json parse_json(const std::string& text, const std::string& source, int max_depth) {
  LB_CHECK(text.size() <= kMaxJsonBytes, source, ": ", text.size(), " bytes of JSON exceed the limit of ",
           kMaxJsonBytes, " bytes");
  // nlohmann's parser is iterative; the callback stops it before the document gets deep, and
  // at the first duplicated key (nlohmann would keep the last value without a word, so
  // `"lr": 1e-3, "lr": 7.0` would train at 7.0).
  KeySets keys;
  const auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > max_depth) throw TooDeep{};
    if (event == E::object_start) keys.open();
    else if (event == E::object_end) keys.close();
    else if (event == E::key && !keys.insert(parsed.get_ref<const std::string&>())) throw DuplicateKey{};
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const TooDeep&) {
    LB_FAIL(source, ": JSON nested deeper than ", max_depth, " levels");
  } catch (const DuplicateKey&) {
    const Duplicate d = locate_duplicate(text);
    LB_FAIL(source, ":", d.second_line, ": duplicate key \"", printable(d.key), "\" in ",
            d.object.empty() ? std::string("the top-level object") : "object " + printable(d.object),
            " (first on line ", d.first_line, "); a key may appear only once per object. HINT: delete one");
  } catch (const nlohmann::json::parse_error& e) {
    LB_FAIL(source, ":", position(text, e.byte), ": invalid JSON: ", library_detail(e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range 406: a number past double's range
    LB_FAIL(source, ": invalid JSON: ", library_detail(e.what()));
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
