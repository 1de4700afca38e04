// Tape autograd. A differentiable op computes its output, then (when grad mode is on and an
// input requires grad) records a Node holding only the tensors its backward needs. Nodes
// carry a sequence number: creation order is a topological order, so backward walks the
// reachable nodes by descending sequence (the tape, reversed). Gradients accumulate (+=).
//
// Pattern for an op (see src/ops/elementwise.cpp):
//   Tensor out = ...compute...;
//   if (autograd::should_record({a, b}))
//     autograd::record("mul", out, {a, b}, /*saved=*/{a, b},
//         [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
//           return std::vector<Tensor>{need[0] ? mul(g, s[1]) : Tensor(),
//                                      need[1] ? mul(g, s[0]) : Tensor()};
//         });
// The backward function gets the output gradient, the saved tensors (detached: they have no
// history, which breaks reference cycles; its own copy of the list) and which inputs need a
// gradient; it returns one
// tensor per input (undefined = no gradient), shaped like that input. It runs with grad
// mode off.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "lb/autograd/grad_mode.h"
#include "lb/core/tensor.h"

namespace lb::autograd {

class Node;

// Where an input's gradient goes: the node that produced it, or the leaf tensor itself.
struct Edge {
  std::shared_ptr<Node> node;
  std::shared_ptr<TensorImpl> leaf;
  bool needed() const { return node != nullptr || leaf != nullptr; }
};

// `saved` is this application's own copy (encoded tensors decoded): a backward may drop an
// entry once it is done with it, so that a decoded copy does not outlive its use.
using BackwardFn = std::function<std::vector<Tensor>(
    const Tensor& grad_output, std::vector<Tensor>& saved, const std::vector<bool>& needs)>;

class Node {
 public:
  Node(std::string name, std::vector<Edge> inputs, std::vector<Tensor> saved, BackwardFn fn);
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const std::string& name() const { return name_; }
  uint64_t seq() const { return seq_; }
  const std::vector<Edge>& inputs() const { return inputs_; }
  const std::vector<Tensor>& saved() const { return saved_; }
  bool released() const { return released_; }
  // Attribution (saved_breakdown.h): the module path it was recorded in, and per saved tensor
  // which input it is (0, 1, ...), or kOutputRole / kStateRole.
  static constexpr int kOutputRole = -1, kStateRole = -2;
  // "input", "input1", ..., "output", "state".
  static std::string role_name(int role);
  const std::string& module_scope() const { return scope_; }
  // How to recompute this node's output bit for bit from tensors the tape holds anyway
  // (null fn: not possible). Set by ops that keep their input (GELU, LayerNorm, attention:
  // `kept` = their saved tensors), and passed on by views and index_select of such an output
  // (`kept` = the producer's, plus the index): a consumer that would keep the output for its
  // own backward keeps `kept` instead and recomputes it (kept_input.h), so a chain keeps one
  // tensor.
  using Recompute = std::function<Tensor(const std::vector<Tensor>& kept)>;
  struct OutputRecipe {
    std::vector<Tensor> kept;
    Recompute fn;
  };
  const OutputRecipe& output_recipe() const { return recipe_; }
  void set_output_recipe(Recompute fn) { recipe_ = {saved_, std::move(fn)}; }  // kept = saved()
  void set_output_recipe(OutputRecipe r) { recipe_ = std::move(r); }
  const std::vector<int>& saved_roles() const { return roles_; }
  void set_origin(std::string scope, std::vector<int> roles) {
    scope_ = std::move(scope);
    roles_ = std::move(roles);
  }

  std::vector<Tensor> apply(const Tensor& grad_output);  // throws if released
  void release();  // frees saved tensors and the closure (after backward)

 private:
  std::string name_;
  uint64_t seq_;
  std::vector<Edge> inputs_;
  std::vector<Tensor> saved_;
  BackwardFn fn_;
  bool released_ = false;
  std::string scope_;
  std::vector<int> roles_;
  OutputRecipe recipe_;
};

// True when grad mode is on and any defined input requires grad.
bool should_record(std::initializer_list<Tensor> inputs);
bool should_record(const std::vector<Tensor>& inputs);

// Attaches a new node to `out` (which becomes a non-leaf requiring grad). `saved` tensors
// are stored detached, and their storages are re-tagged MemTag::Saved for accounting.
void record(const std::string& name, Tensor& out, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& saved, BackwardFn fn);

// Runs backward from `root` (see Tensor::backward).
void run_backward(const Tensor& root, const Tensor& grad_output, bool retain_graph);

// Called during backward the moment a leaf's gradient for this pass is complete (every node
// of the pass that feeds it has run), with the leaf; data-parallel training starts a bucket's
// all-reduce from it while the backward goes on (DDP's overlap). One hook per process; set
// an empty function to remove it. It runs on the thread that called backward().
using LeafGradReadyHook = std::function<void(const TensorImpl* leaf)>;
void set_leaf_grad_ready_hook(LeafGradReadyHook hook);

// Measured activation memory: bytes of the unique storages held by live (unreleased) nodes,
// excluding parameters and buffers, which are resident anyway.
int64_t saved_bytes();
// Number of live nodes (for tests and leak checks).
int64_t live_nodes();
// Calls f on every live (unreleased) node in recording order, under the tape's lock (f must
// not record or free nodes).
void visit_live_nodes(const std::function<void(const Node&)>& f);

}  // namespace lb::autograd
