// Optimizer base: parameter groups, stepping, checkpoint state; plus gradient clipping.
#include "lb/io/json_file.h"
#include "lb/optim/optimizer.h"

#include <cmath>
#include <set>

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/row_sparse_grad.h"
#include "lb/core/dispatch.h"
#include "lb/core/glob.h"
#include "src/backend/optim.h"

namespace lb::optim {

std::vector<ParamGroup> param_groups_with_decay(const NamedTensors& named, double lr,
                                                double weight_decay,
                                                const std::vector<std::string>& no_decay) {
  ParamGroup decay{{}, lr, weight_decay}, plain{{}, lr, 0.0};
  for (const auto& [name, p] : named) {
    if (!p.requires_grad()) continue;
    bool nd = false;
    for (const auto& pat : no_decay) nd = nd || glob_match(pat, name);
    (nd ? plain : decay).params.emplace_back(name, p);
  }
  std::vector<ParamGroup> out;
  if (!decay.params.empty()) out.push_back(decay);
  if (!plain.params.empty()) out.push_back(plain);
  return out;
}

std::vector<ParamGroup> single_group(const NamedTensors& named, double lr, double weight_decay) {
  ParamGroup g{{}, lr, weight_decay};
  for (const auto& [name, p] : named)
    if (p.requires_grad()) g.params.emplace_back(name, p);
  return {g};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups) : groups_(std::move(groups)) {
  std::set<std::string> seen;
  for (auto& g : groups_) {
    LB_CHECK(g.lr >= 0, "learning rate must be >= 0, got ", g.lr);
    LB_CHECK(g.weight_decay >= 0, "weight decay must be >= 0, got ", g.weight_decay);
    if (g.initial_lr < 0) g.initial_lr = g.lr;
    for (auto& [name, p] : g.params) {
      LB_CHECK(seen.insert(name).second, "parameter '", name, "' appears in two groups");
      LB_CHECK(p.dtype() == DType::F32 || p.dtype() == DType::F64, "parameter '", name,
               "' has dtype ", dtype_name(p.dtype()), "; optimizers update f32/f64");
    }
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi)
    for (size_t pi = 0; pi < groups_[gi].params.size(); ++pi)
      index_[groups_[gi].params[pi].second.impl()] = {gi, pi};
}

void Optimizer::step() {
  begin_step();
  NoGradGuard no_grad;
  for (auto& g : groups_)
    for (auto& [name, p] : g.params) {
      const Tensor grad = p.grad();
      if (grad.defined()) update_checked(name, p, grad, g);
    }
}

void Optimizer::begin_step() { ++step_count_; }

bool Optimizer::update_parameter(const TensorImpl* leaf) {
  auto it = index_.find(leaf);
  if (it == index_.end()) return false;
  ParamGroup& g = groups_[it->second.first];
  auto& [name, p] = g.params[it->second.second];
  const Tensor grad = p.grad();
  if (!grad.defined()) return false;
  NoGradGuard no_grad;
  update_checked(name, p, grad, g);
  p.zero_grad();
  return true;
}

bool Optimizer::takes_rows(const TensorImpl* leaf) const {
  auto it = index_.find(leaf);
  if (it == index_.end()) return false;
  const Tensor& p = groups_[it->second.first].params[it->second.second].second;
  return p.dim() == 2 && p.is_contiguous() && rows_supported(p);
}

void Optimizer::update_parameter_rows(const TensorImpl* leaf, const Tensor& rows, const Tensor& values) {
  auto it = index_.find(leaf);
  LB_CHECK(it != index_.end() && takes_rows(leaf), "internal: update_parameter_rows for a parameter that takes none");
  ParamGroup& g = groups_[it->second.first];
  auto& [name, p] = g.params[it->second.second];
  NoGradGuard no_grad;
  Tensor dense = p.grad();
  if (dense.defined()) {  // a dense part too (a weight used outside an embedding as well)
    autograd::add_row_sparse_into(dense, {rows, values});
    update_checked(name, p, dense, g);
  } else {
    LB_CHECK(rows.dtype() == DType::I64 && rows.dim() == 1 && values.dim() == 2 && values.size(0) == rows.size(0) &&
                 values.size(1) == p.size(1) && values.dtype() == p.dtype() && values.is_contiguous(),
             "gradient rows of '", name, "': rows ", shape_str(rows.shape()), " and values ",
             shape_str(values.shape()), " for a parameter ", shape_str(p.shape()));
    update_rows(name, p, rows, values, g, state_[name]);
  }
  p.zero_grad();
}

bool Optimizer::rows_supported(const Tensor&) const { return false; }

void Optimizer::update_rows(const std::string& name, Tensor&, const Tensor&, const Tensor&, const ParamGroup&,
                            std::map<std::string, Tensor>&) {
  LB_FAIL("internal: ", type_name(), " has no row-sparse update (parameter '", name, "')");
}

std::string Optimizer::parameter_name(const TensorImpl* leaf) const {
  auto it = index_.find(leaf);
  return it == index_.end() ? "" : groups_[it->second.first].params[it->second.second].first;
}

void Optimizer::update_checked(const std::string& name, Tensor& p, const Tensor& grad, const ParamGroup& group) {
  LB_CHECK(grad.shape() == p.shape(), "gradient of '", name, "' has shape ", shape_str(grad.shape()), ", parameter ",
           shape_str(p.shape()));
  LB_CHECK(p.is_contiguous() && grad.is_contiguous(), "parameter '", name, "' and its gradient must be contiguous");
  update(name, p, grad, group, state_[name]);
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& [_, p] : g.params) p.zero_grad();
}

void Optimizer::set_lr_factor(double factor) {
  for (auto& g : groups_) g.lr = g.initial_lr * factor;
}

nlohmann::json Optimizer::state_json() const {
  nlohmann::json j;
  j["type"] = type_name();
  j["hyperparams"] = hyperparams();
  j["step"] = step_count_;
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : groups_) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [n, _] : g.params) names.push_back(n);
    groups.push_back({{"lr", g.lr}, {"initial_lr", g.initial_lr},
                      {"weight_decay", g.weight_decay}, {"params", names}});
  }
  j["groups"] = groups;
  return j;
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  for (const auto& [pname, kinds] : state_)
    for (const auto& [kind, t] : kinds) out.emplace_back(kind + "." + pname, t);
  return out;
}

std::pair<Shape, DType> Optimizer::state_spec(const std::string&, const Tensor& p) const {
  return {p.shape(), p.dtype()};
}

void Optimizer::check_saved_hyperparams(const nlohmann::json&) const {}

void Optimizer::load_state(const nlohmann::json& j, const std::map<std::string, Tensor>& tensors) {
  LB_CHECK(j.value("type", std::string()) == type_name(), "optimizer state is for '",
           j.value("type", std::string("?")), "', this optimizer is '", type_name(), "'");
  check_saved_hyperparams(j.value("hyperparams", nlohmann::json::object()));
  const auto& groups = j.at("groups");
  LB_CHECK(groups.size() == groups_.size(), "optimizer state has ", groups.size(),
           " parameter groups, this optimizer ", groups_.size());
  for (size_t i = 0; i < groups_.size(); ++i) {
    const std::string where = "optimizer.groups[" + std::to_string(i) + "]";
    groups_[i].lr = io::json_number(groups[i], "lr", where);
    groups_[i].initial_lr = io::json_number(groups[i], "initial_lr", where);
    groups_[i].weight_decay = io::json_number(groups[i], "weight_decay", where);
    // A negative rate would ascend the loss; no optimizer or schedule of ours writes one.
    LB_CHECK(groups_[i].lr >= 0 && groups_[i].initial_lr >= 0 && groups_[i].weight_decay >= 0, where,
             ": lr, initial_lr and weight_decay must be non-negative, got ", groups_[i].lr, ", ",
             groups_[i].initial_lr, ", ", groups_[i].weight_decay);
  }
  step_count_ = io::json_int(j, "step", 0, INT64_MAX, "optimizer");
  state_.clear();
  for (auto& g : groups_)
    for (auto& [name, p] : g.params)
      for (const auto& kind : state_kinds()) {
        auto it = tensors.find(kind + "." + name);
        if (it == tensors.end()) continue;  // buffer not created yet (e.g. no grad so far)
        const auto [shape, dtype] = state_spec(kind, p);
        LB_CHECK(it->second.shape() == shape, "optimizer state '", kind, ".", name, "' has shape ",
                 shape_str(it->second.shape()), ", expected ", shape_str(shape));
        LB_CHECK(it->second.dtype() == dtype || (dtype_is_floating(dtype) && dtype_is_floating(it->second.dtype())),
                 "optimizer state '", kind, ".", name, "' is ", dtype_name(it->second.dtype()), ", expected ",
                 dtype_name(dtype));
        Tensor t = Tensor::empty(shape, dtype, p.device(), MemTag::Optimizer);
        t.copy_(it->second);
        state_[name][kind] = t;
      }
}

double grad_sum_squares(const Tensor& g) { return backend::optim_kernels(g.device()).sum_squares(g); }

void scale_grad(Tensor& g, double coef) { backend::optim_kernels(g.device()).scale_in_double(g, coef); }

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  double sq = 0;
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) sq += grad_sum_squares(g);
  }
  const double norm = std::sqrt(sq);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (const auto& p : params) {
      Tensor g = p.grad();
      if (g.defined()) scale_grad(g, coef);
    }
  return norm;
}

}  // namespace lb::optim
