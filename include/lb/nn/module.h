// Module tree: named children, parameters and buffers whose dotted names equal the PyTorch /
// Hugging Face state_dict keys ("encoder.layer.0.attention.self.query.weight").
// A module registers pointers to its own Tensor members, so layers keep plain members
// (weight_, bias_) and to(device) / load_state_dict can replace the tensors in place.
// Modules are neither copyable nor movable (the registry holds member pointers).
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lb/core/glob.h"
#include "lb/core/tensor.h"

namespace lb::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Result of load_state_dict: keys the module has but the dict lacks, and the reverse.
struct LoadReport {
  std::vector<std::string> missing;
  std::vector<std::string> unexpected;
};

// Glob over dotted names (lb/core/glob.h).
using lb::glob_match;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // A short type name for the printed tree ("Linear", "BertLayer").
  virtual std::string type_name() const = 0;
  // One-line description of the layer's options for the printed tree ("768 -> 3072").
  virtual std::string extra_repr() const { return ""; }

  // ---- introspection (dotted names, registration order, children after own entries) ----
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Module*>> named_modules();  // includes this as ""
  std::vector<std::pair<std::string, Module*>> named_children();
  std::vector<Tensor> parameters() const;
  NamedTensors state_dict() const;  // parameters then buffers, per module
  int64_t num_parameters(bool trainable_only = false) const;
  std::string tree() const;  // printable module tree with parameter counts

  // ---- state ----
  // Copies values from `dict` (shapes and dtypes must match; errors name the key). Keys not
  // found are reported, not fatal, unless strict.
  LoadReport load_state_dict(const std::map<std::string, Tensor>& dict, bool strict = true);
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void to(Device device);
  // Converts floating-point parameters and buffers (e.g. to f64 for reference checks).
  void to(DType dtype);
  void zero_grad();
  // Sets requires_grad=false on every parameter whose dotted name matches `pattern`
  // (or true with unfreeze). Returns how many matched; none matching is an error.
  int64_t freeze(const std::string& pattern);
  int64_t unfreeze(const std::string& pattern);

  // Recomputation (lb/autograd/recompute.h): a block — a BERT or ViT encoder layer, a ResNet
  // block (RecomputableBlock) — set to recompute keeps only its input for backward and runs
  // its forward again there. False (and nothing set) for any other module.
  virtual bool set_recompute(bool on) {
    (void)on;
    return false;
  }

  // This module's dotted name from the root of the tree it is registered in ("" for a root);
  // a forward opens an autograd::ModuleScope with it, so what the tape keeps is attributed
  // to modules (autograd/saved_breakdown.h).
  const std::string& path() const { return path_; }

 protected:
  // Registers a member tensor as a parameter: its storage is accounted as MemTag::Parameter
  // and it requires grad unless `trainable` is false.
  void register_parameter(const std::string& name, Tensor* slot, bool trainable = true);
  void register_buffer(const std::string& name, Tensor* slot);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  void set_path(const std::string& path);  // this module's and, below it, its children's
  void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const;
  void collect_slots(const std::string& prefix,
                     std::vector<std::pair<std::string, Tensor*>>& out, bool params,
                     bool buffers);
  int64_t set_trainable(const std::string& pattern, bool on);
  void print(std::ostream& os, const std::string& name, int depth) const;

  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::string path_;
};

// A named group of submodules with no forward of its own, for reproducing a reference
// layout's nesting (e.g. Hugging Face "attention.output.dense").
class Container : public Module {
 public:
  explicit Container(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> m) {
    return register_module(name, std::move(m));
  }
  // Parameters owned by the enclosing model but named under this container.
  void add_parameter(const std::string& name, Tensor* slot) { register_parameter(name, slot); }

 private:
  std::string type_;
};

// A list of modules named "0", "1", ... (like torch.nn.ModuleList).
class ModuleList : public Module {
 public:
  std::string type_name() const override { return "ModuleList"; }
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    items_.push_back(m);
    return register_module(std::to_string(items_.size() - 1), m);
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return items_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace lb::nn
