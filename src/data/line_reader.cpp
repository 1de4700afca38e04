// LineReader and the UTF-8 check (see line_reader.h).
#include "line_reader.h"

#include <filesystem>

#include "lb/core/error.h"

namespace lb::data {

size_t invalid_utf8_at(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    if (c < 0x80) { ++i; continue; }
    size_t len;
    unsigned cp;
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return i;
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    const unsigned min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string::npos;
}

LineReader LineReader::open(const std::string& path) {
  std::error_code ec;
  LB_CHECK(std::filesystem::is_regular_file(path, ec), "no file ", path);
  LineReader in(path);
  LB_CHECK(in.is_open(), "cannot open ", path);
  return in;
}

bool LineReader::next(std::string& line) {
  if (!std::getline(in_, line)) {
    LB_CHECK(!in_.bad(), path_, ": read error after line ", line_no_);
    return false;
  }
  ++line_no_;
  if (line_no_ == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  const size_t bad = invalid_utf8_at(line);
  LB_CHECK(bad == std::string::npos, path_, ":", line_no_, ": invalid UTF-8 at byte ", bad + 1,
           " of the line");
  return true;
}

}  // namespace lb::data
