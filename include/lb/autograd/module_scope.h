// Which module an op runs in, for attributing what the tape keeps (saved_breakdown.h): a
// module's forward opens a scope with its dotted path, and every node recorded inside carries
// the innermost one. Attribution only: nothing computes differently under a scope.
#pragma once
#include <string>

namespace lb::autograd {

class ModuleScope {
 public:
  // `path` must outlive the scope (a module's own path member).
  explicit ModuleScope(const std::string& path);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;
};

// The innermost open scope's path on this thread ("" outside any).
const std::string& current_module_scope();

}  // namespace lb::autograd
