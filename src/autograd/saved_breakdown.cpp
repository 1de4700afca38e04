// saved_breakdown: the tape's kept storages by module, op and role (see saved_breakdown.h).
#include "lb/autograd/saved_breakdown.h"

#include <unordered_set>

#include "lb/autograd/node.h"

namespace lb::autograd {

std::vector<SavedEntry> saved_breakdown() {
  std::vector<SavedEntry> out;
  std::unordered_set<const Storage*> seen;
  visit_live_nodes([&](const Node& n) {
    const auto& saved = n.saved();
    const auto& roles = n.saved_roles();
    for (size_t i = 0; i < saved.size(); ++i) {
      const Tensor& t = saved[i];
      if (!t.defined()) continue;
      const Storage* s = t.storage().get();
      if (s->tag() == MemTag::Parameter || s->tag() == MemTag::Buffer) continue;
      if (!seen.insert(s).second) continue;  // kept by an earlier node: counted there
      const int role = i < roles.size() ? roles[i] : Node::kStateRole;
      SavedEntry e;
      e.module = n.module_scope();
      e.op = n.name();
      e.role = Node::role_name(role);
      e.bytes = static_cast<int64_t>(s->nbytes());
      e.dtype = t.dtype();
      e.shape = t.shape();
      out.push_back(std::move(e));
    }
  });
  return out;
}

}  // namespace lb::autograd
