// The one reader for JSON that comes from users and files (configs, Hugging Face
// config.json / tokenizer_config.json, trainer_state.json, run and compare files): a size
// limit, a nesting-depth limit (deep input would overflow the stack of the recursive code
// that later copies, prints or destroys it), no duplicate keys (nlohmann would keep the last
// silently; the error names the key, both lines and the object's JSON pointer), and errors
// that name the source and, for syntax errors, line:column. A leading UTF-8 BOM is skipped.
#pragma once
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

namespace lb::io {

constexpr int kMaxJsonDepth = 64;                  // no file we read needs more than ~6
constexpr size_t kMaxJsonBytes = size_t{256} << 20;

// `source` names the text in errors (a path, "--set optimizer.lr").
nlohmann::json parse_json(const std::string& text, const std::string& source,
                          int max_depth = kMaxJsonDepth);
// Reads and parses a file; a missing or unreadable file is an error naming it.
nlohmann::json read_json_file(const std::string& path, int max_depth = kMaxJsonDepth);

// Checked reads of numbers from files we wrote but a user may have edited (checkpoints):
// j[key] must be present and an integer in [lo, hi] / a non-negative integer that fits
// uint64 / a finite number; anything else (1e300, -1.5, 2^32+1 for a small field, a string)
// is an error naming `path`.key and the value, never an undefined conversion.
int64_t json_int(const nlohmann::json& j, const char* key, int64_t lo, int64_t hi, const std::string& path);
uint64_t json_uint(const nlohmann::json& j, const char* key, const std::string& path);
double json_number(const nlohmann::json& j, const char* key, const std::string& path);

}  // namespace lb::io
