// ModuleScope: a per-thread stack of module paths (see lb/autograd/module_scope.h).
#include "lb/autograd/module_scope.h"

#include <vector>

namespace lb::autograd {

namespace {
// Pointers to the modules' own path strings: opening a scope allocates nothing.
thread_local std::vector<const std::string*> g_scopes;
}  // namespace

ModuleScope::ModuleScope(const std::string& path) { g_scopes.push_back(&path); }

ModuleScope::~ModuleScope() { g_scopes.pop_back(); }

const std::string& current_module_scope() {
  static const std::string none;
  return g_scopes.empty() ? none : *g_scopes.back();
}

}  // namespace lb::autograd
