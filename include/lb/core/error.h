// lb::Error and LB_CHECK: every user-facing failure throws lb::Error carrying file:line
// and a message that names the shapes, dtypes, files or JSON paths involved.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace lb {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_all(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append_all(os, rest...);
}
template <typename... Args>
[[noreturn]] void throw_error(const char* file, int line, const char* cond, const Args&... args) {
  std::ostringstream os;
  append_all(os, args...);
  if (cond) os << " [check failed: " << cond << "]";
  os << " (" << file << ":" << line << ")";
  throw Error(os.str());
}
}  // namespace detail

}  // namespace lb

// Always on (not a debug assert): throws lb::Error with the message and location.
#define LB_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) ::lb::detail::throw_error(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#define LB_FAIL(...) ::lb::detail::throw_error(__FILE__, __LINE__, nullptr, __VA_ARGS__)
