// Line-by-line reading of the text data files (GLUE TSVs, a user's CSV / TSV / JSON Lines):
// a leading UTF-8 BOM and each line's trailing '\r' are dropped, every line is checked to be
// valid UTF-8 (an error names file:line and the byte), and the number of the line last read
// is kept for error messages. Internal to lb_data.
#pragma once
#include <cstdint>
#include <fstream>
#include <string>

namespace lb::data {

// Byte offset of the first invalid UTF-8 sequence (overlong forms and surrogates included),
// or npos when the whole string is valid.
size_t invalid_utf8_at(const std::string& s);

class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), in_(path, std::ios::binary) {}
  // A reader of `path`, which must be a regular file that opens ("no file PATH" otherwise).
  static LineReader open(const std::string& path);
  bool is_open() const { return in_.is_open(); }
  // The next line, blank lines included; false at the end of the file.
  bool next(std::string& line);
  int64_t line_no() const { return line_no_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ifstream in_;
  int64_t line_no_ = 0;
};

}  // namespace lb::data
