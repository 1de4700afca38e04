// Nodes, the live-node registry (the tape) and saved-bytes accounting.
#include "lb/autograd/node.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_set>

#include "lb/autograd/module_scope.h"
#include "lb/autograd/peak_watch.h"
#include "lb/autograd/saved_codec.h"

namespace lb::autograd {

namespace {
std::atomic<uint64_t> g_next_seq{0};
std::mutex g_tape_mutex;
std::unordered_set<const Node*>& tape() {
  static std::unordered_set<const Node*> t;
  return t;
}
}  // namespace

Node::Node(std::string name, std::vector<Edge> inputs, std::vector<Tensor> saved, BackwardFn fn)
    : name_(std::move(name)),
      seq_(g_next_seq.fetch_add(1)),
      inputs_(std::move(inputs)),
      saved_(std::move(saved)),
      fn_(std::move(fn)) {
  std::lock_guard<std::mutex> lock(g_tape_mutex);
  tape().insert(this);
}

Node::~Node() {
  std::lock_guard<std::mutex> lock(g_tape_mutex);
  tape().erase(this);
}

std::vector<Tensor> Node::apply(const Tensor& grad_output) {
  LB_CHECK(!released_, "backward through '", name_,
           "' a second time: its saved tensors were freed. HINT: pass retain_graph=true to the "
           "first backward()");
  std::vector<bool> needs(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i) needs[i] = inputs_[i].needed();
  std::vector<Tensor> saved = saved_;  // encoded ones decoded (saved_codec.h)
  for (Tensor& t : saved) t = decode(t);
  std::vector<Tensor> grads = fn_(grad_output, saved, needs);
  LB_CHECK(grads.size() == inputs_.size(), "internal: backward of '", name_, "' returned ",
           grads.size(), " gradients for ", inputs_.size(), " inputs");
  return grads;
}

void Node::release() {
  std::lock_guard<std::mutex> lock(g_tape_mutex);
  released_ = true;
  saved_.clear();
  saved_.shrink_to_fit();
  fn_ = nullptr;
  recipe_ = {};
}

std::string Node::role_name(int role) {
  return role == kOutputRole ? "output"
         : role == kStateRole ? "state"
         : role == 0          ? "input"
                              : "input" + std::to_string(role);
}

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const std::string& name, Tensor& out, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& saved, BackwardFn fn) {
  std::vector<Edge> edges(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    if (t.grad_fn()) edges[i].node = t.grad_fn();
    else edges[i].leaf = t.impl_ptr();
  }
  std::vector<Tensor> kept;
  std::vector<int> roles;
  kept.reserve(saved.size());
  roles.reserve(saved.size());
  for (const Tensor& s : saved) {
    int role = Node::kStateRole;
    if (s.defined()) {
      if (out.defined() && s.storage() == out.storage()) role = Node::kOutputRole;
      for (size_t i = 0; i < inputs.size() && role == Node::kStateRole; ++i)
        if (inputs[i].defined() && s.storage() == inputs[i].storage()) role = static_cast<int>(i);
    }
    roles.push_back(role);
    if (!s.defined()) {
      kept.emplace_back();
      continue;
    }
    const Tensor e = codecs_active() ? encode_kept(s, name, Node::role_name(role)) : s;
    const MemTag tag = e.storage()->tag();
    if (tag == MemTag::Other || tag == MemTag::Workspace) e.storage()->set_tag(MemTag::Saved);
    kept.push_back(e.detach());
  }
  auto node = std::make_shared<Node>(name, std::move(edges), std::move(kept), std::move(fn));
  node->set_origin(current_module_scope(), std::move(roles));
  PeakWatch::at_node(*node, false);
  out.impl()->grad_fn = std::move(node);
  out.impl()->requires_grad = true;
}

void visit_live_nodes(const std::function<void(const Node&)>& f) {
  std::lock_guard<std::mutex> lock(g_tape_mutex);
  std::vector<const Node*> live;
  live.reserve(tape().size());
  for (const Node* n : tape())
    if (!n->released()) live.push_back(n);
  std::sort(live.begin(), live.end(), [](const Node* a, const Node* b) { return a->seq() < b->seq(); });
  for (const Node* n : live) f(*n);
}

int64_t saved_bytes() {
  std::unordered_set<const Storage*> seen;
  int64_t total = 0;
  visit_live_nodes([&](const Node& n) {
    for (const Tensor& t : n.saved()) {
      if (!t.defined()) continue;
      const Storage* s = t.storage().get();
      if (s->tag() == MemTag::Parameter || s->tag() == MemTag::Buffer) continue;
      if (seen.insert(s).second) total += static_cast<int64_t>(s->nbytes());
    }
  });
  return total;
}

int64_t live_nodes() {
  std::lock_guard<std::mutex> lock(g_tape_mutex);
  return static_cast<int64_t>(tape().size());
}

}  // namespace lb::autograd
