// The one reader for JSON that comes from users and files (configs, Hugging Face
// config.json / tokenizer_config.json, trainer_state.json, run and compare files): a size
// limit, a nesting-depth limit (deep input would overflow the stack of the recursive code
// that later copies, prints or destroys it), and errors that name the source and, for
// syntax errors, line:column.
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

}  // namespace lb::io
