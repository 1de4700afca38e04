// lb::Error and LB_CHECK: every user-facing failure throws lb::Error with a message that
// names the shapes, dtypes, files or JSON paths involved (what()), and apart from it where in
// leanback it was raised (where(), for developers: the CLI shows it only with
// LEANBACK_DEBUG=1 or --verbose).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace lb {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, std::string where = "") : std::runtime_error(msg), where_(std::move(where)) {}
  // "[check failed: <condition>] (<source file>:<line>)" of the LB_CHECK / LB_FAIL that threw;
  // "" for an Error made directly.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
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
  std::ostringstream os, where;
  append_all(os, args...);
  if (cond) where << "[check failed: " << cond << "] ";
  where << "(" << file << ":" << line << ")";
  throw Error(os.str(), where.str());
}
}  // namespace detail

}  // namespace lb

// Always on (not a debug assert): throws lb::Error with the message and location.
#define LB_CHECK(cond, ...)                                                      \
  do {                                                                           \
    if (!(cond)) ::lb::detail::throw_error(__FILE__, __LINE__, #cond, __VA_ARGS__); \
  } while (0)

#define LB_FAIL(...) ::lb::detail::throw_error(__FILE__, __LINE__, nullptr, __VA_ARGS__)
