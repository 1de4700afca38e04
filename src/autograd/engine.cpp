// Backward: walk the nodes reachable from the root by descending sequence number (the tape in
// reverse), accumulate gradients per node, deliver leaf gradients into .grad (+=), freeing
// each node's saved tensors once it has been applied unless retain_graph.
#include <algorithm>
#include <functional>
#include <unordered_map>

#include "lb/autograd/node.h"
#include "lb/autograd/peak_watch.h"
#include "src/backend/elementwise.h"

namespace lb::autograd {

namespace {
// Leaf gradients are stored as fresh contiguous tensors tagged as the leaf says ("gradient"
// but for stand-ins of activations; never aliasing a temporary that someone else may hold),
// then accumulated in place.
void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  LB_CHECK(g.shape() == leaf.shape, "internal: gradient ", shape_str(g.shape()),
           " for a leaf of shape ", shape_str(leaf.shape));
  if (!leaf.grad.defined()) {
    // A gradient nobody else holds (no other handle, no view of its storage) is adopted as
    // is, retagged: saves a copy the size of the parameter (the Linear weight-gradient case).
    const auto& st = g.storage();
    if (g.impl_ptr().use_count() == 1 && st.use_count() == 1 && g.is_contiguous() &&
        g.offset() == 0 && g.dtype() == leaf.dtype && st->device() == leaf.storage->device() &&
        st->nbytes() == g.nbytes()) {
      st->set_tag(leaf.grad_tag);
      leaf.grad = g;
      return;
    }
    Tensor fresh = Tensor::empty(leaf.shape, leaf.dtype, leaf.storage->device(), leaf.grad_tag);
    fresh.copy_(g);
    leaf.grad = fresh;
  } else {
    backend::elementwise_kernels(leaf.grad.device()).add_scaled_(leaf.grad, g, 1.0);
  }
}

// A node's incoming gradients summed into a new tensor (never in place: `slot` may be a
// gradient another node still holds).
void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined()) {
    slot = g;
    return;
  }
  Tensor sum = Tensor::empty(slot.shape(), slot.dtype(), slot.device());
  backend::elementwise_kernels(slot.device()).binary(backend::BinaryOp::Add, slot, g, sum);
  slot = sum;
}

LeafGradReadyHook& leaf_hook() {
  static LeafGradReadyHook h;
  return h;
}
}  // namespace

void set_leaf_grad_ready_hook(LeafGradReadyHook hook) { leaf_hook() = std::move(hook); }

void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  LB_CHECK(root.defined(), "backward() on an undefined tensor");
  LB_CHECK(root.requires_grad(),
           "backward() on a tensor that does not require grad (no input had requires_grad, or "
           "it was computed under NoGradGuard)");
  Tensor g0 = grad_output;
  if (!g0.defined()) {
    LB_CHECK(root.numel() == 1, "backward() without a gradient needs a scalar output, got shape ",
             shape_str(root.shape()), "; pass grad_output");
    g0 = Tensor::ones(root.shape(), root.dtype(), root.device());
  }
  LB_CHECK(g0.shape() == root.shape(), "backward(): gradient shape ", shape_str(g0.shape()),
           " does not match output shape ", shape_str(root.shape()));
  NoGradGuard no_grad;
  if (!root.grad_fn()) {  // a leaf: its gradient is the given one
    accumulate_leaf(*root.impl(), g0);
    return;
  }
  // Collect the reachable nodes.
  std::vector<Node*> order;
  std::unordered_map<Node*, Tensor> grads;
  {
    std::vector<Node*> stack{root.grad_fn().get()};
    std::unordered_map<Node*, bool> seen{{stack[0], true}};
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Edge& e : n->inputs())
        if (e.node && !seen[e.node.get()]) {
          seen[e.node.get()] = true;
          stack.push_back(e.node.get());
        }
    }
  }
  std::sort(order.begin(), order.end(), [](Node* a, Node* b) { return a->seq() > b->seq(); });
  // With a ready hook: how many node edges of this pass feed each leaf; the leaf is ready
  // when the last of them has been processed.
  const LeafGradReadyHook& hook = leaf_hook();
  std::unordered_map<const TensorImpl*, int> pending;
  if (hook)
    for (Node* n : order)
      for (const Edge& e : n->inputs())
        if (!e.node && e.leaf) ++pending[e.leaf.get()];
  auto leaf_done = [&](const TensorImpl* leaf) {
    if (hook && --pending[leaf] == 0) hook(leaf);
  };
  grads[root.grad_fn().get()] = g0;
  for (Node* n : order) {
    auto it = grads.find(n);
    if (it == grads.end()) {  // no gradient reached this node
      if (hook)
        for (const Edge& e : n->inputs())
          if (!e.node && e.leaf) leaf_done(e.leaf.get());
      continue;
    }
    Tensor g = std::move(it->second);
    grads.erase(it);
    std::vector<Tensor> in_grads = n->apply(g);
    g = Tensor();
    PeakWatch::at_node(*n, true);
    // Each node is applied once per pass: what it kept is freed now, not at the end of the
    // pass, so the backward's peak holds only what the nodes still to come need (its producers
    // are applied after it, so a recipe of theirs it used is still there).
    if (!retain_graph) n->release();
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Edge& e = n->inputs()[i];
      const bool has = i < in_grads.size() && in_grads[i].defined() && e.needed();
      if (has && e.node) accumulate(grads[e.node.get()], in_grads[i]);
      else if (has) accumulate_leaf(*e.leaf, in_grads[i]);
      if (!e.node && e.leaf) leaf_done(e.leaf.get());
    }
  }
  if (!retain_graph)
    for (Node* n : order) n->release();  // the nodes no gradient reached
}

}  // namespace lb::autograd
