// User data quoted in error messages (labels, keys, fields): bytes that are not printable
// ASCII or part of valid UTF-8 text are written as \xNN, so a NUL cannot cut the message
// short (what() is a C string) and a control byte cannot garble the terminal.
#pragma once
#include <string>
#include <string_view>

namespace lb::io {

inline std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    // Bytes >= 0x80 pass: the readers check UTF-8 themselves, and non-ASCII text stays legible.
    if (c >= 0x20 && c != 0x7F) {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace lb::io
