// Glob over dotted names (lb/core/glob.h).
#include "lb/core/glob.h"

namespace lb {

bool glob_match(const std::string& p, const std::string& s) {
  // Iterative wildcard match with backtracking to the last '*'.
  size_t i = 0, j = 0, star = std::string::npos, mark = 0;
  while (j < s.size()) {
    if (i < p.size() && (p[i] == '?' || p[i] == s[j])) {
      ++i;
      ++j;
    } else if (i < p.size() && p[i] == '*') {
      star = i++;
      mark = j;
    } else if (star != std::string::npos) {
      i = star + 1;
      j = ++mark;
    } else {
      return false;
    }
  }
  while (i < p.size() && p[i] == '*') ++i;
  return i == p.size();
}

}  // namespace lb
