// Module tree: registration, dotted names, state dicts, train/eval, freezing, printing.
#include "lb/nn/module.h"

#include <set>
#include <sstream>

#include "lb/autograd/grad_mode.h"

namespace lb::nn {

namespace {
void check_name(const std::string& name) {
  LB_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "module entry name '", name, "' must be non-empty and contain no '.'");
}
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

void Module::register_parameter(const std::string& name, Tensor* slot, bool trainable) {
  check_name(name);
  LB_CHECK(slot && slot->defined(), "register_parameter('", name, "'): tensor is undefined");
  for (auto& [n, _] : params_) LB_CHECK(n != name, "parameter '", name, "' registered twice");
  slot->storage()->set_tag(MemTag::Parameter);
  slot->set_requires_grad(trainable);
  params_.emplace_back(name, slot);
}

void Module::register_buffer(const std::string& name, Tensor* slot) {
  check_name(name);
  LB_CHECK(slot && slot->defined(), "register_buffer('", name, "'): tensor is undefined");
  slot->storage()->set_tag(MemTag::Buffer);
  buffers_.emplace_back(name, slot);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name);
  LB_CHECK(m != nullptr, "register_module('", name, "'): null module");
  for (auto& [n, _] : children_) LB_CHECK(n != name, "submodule '", name, "' registered twice");
  m->set_path(join(path_, name));
  children_.emplace_back(name, std::move(m));
}

void Module::set_path(const std::string& path) {
  path_ = path;
  for (auto& [n, child] : children_) child->set_path(join(path_, n));
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     NamedTensors& out) const {
  for (const auto& [n, slot] : params ? params_ : buffers_) out.emplace_back(join(prefix, n), *slot);
  if (recurse)
    for (const auto& [n, child] : children_) child->collect(join(prefix, n), params, true, out);
}

void Module::collect_slots(const std::string& prefix,
                           std::vector<std::pair<std::string, Tensor*>>& out, bool params,
                           bool buffers) {
  if (params)
    for (auto& [n, slot] : params_) out.emplace_back(join(prefix, n), slot);
  if (buffers)
    for (auto& [n, slot] : buffers_) out.emplace_back(join(prefix, n), slot);
  for (auto& [n, child] : children_) child->collect_slots(join(prefix, n), out, params, buffers);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", true, recurse, out);
  return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_children() {
  std::vector<std::pair<std::string, Module*>> out;
  for (auto& [n, c] : children_) out.emplace_back(n, c.get());
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [n, c] : children_)
    for (auto& [cn, cm] : c->named_modules()) out.emplace_back(cn.empty() ? n : join(n, cn), cm);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  std::vector<std::pair<std::string, Tensor*>> slots;
  const_cast<Module*>(this)->collect_slots("", slots, true, true);
  for (auto& [n, s] : slots) out.emplace_back(n, *s);
  return out;
}

int64_t Module::num_parameters(bool trainable_only) const {
  int64_t n = 0;
  for (auto& [_, t] : named_parameters())
    if (!trainable_only || t.requires_grad()) n += t.numel();
  return n;
}

LoadReport Module::load_state_dict(const std::map<std::string, Tensor>& dict, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots, true, true);
  LoadReport report;
  std::set<std::string> known;
  NoGradGuard no_grad;
  for (auto& [name, slot] : slots) {
    known.insert(name);
    auto it = dict.find(name);
    if (it == dict.end()) {
      report.missing.push_back(name);
      continue;
    }
    const Tensor& src = it->second;
    LB_CHECK(src.shape() == slot->shape(), "state_dict key '", name, "': shape ",
             shape_str(src.shape()), " does not match the model's ", shape_str(slot->shape()));
    LB_CHECK(dtype_is_floating(src.dtype()) == dtype_is_floating(slot->dtype()),
             "state_dict key '", name, "': dtype ", dtype_name(src.dtype()),
             " is not convertible to the model's ", dtype_name(slot->dtype()));
    slot->copy_(src.device() == slot->device() ? src : src.to(slot->device()));
  }
  for (auto& [name, _] : dict)
    if (!known.count(name)) report.unexpected.push_back(name);
  if (strict) {
    std::ostringstream os;
    for (auto& m : report.missing) os << "\n  missing: " << m;
    for (auto& u : report.unexpected) os << "\n  unexpected: " << u;
    LB_CHECK(report.missing.empty() && report.unexpected.empty(),
             "load_state_dict (strict): keys do not match", os.str());
  }
  return report;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [_, c] : children_) c->train(on);
}

void Module::to(Device device) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots, true, true);
  for (auto& [_, slot] : slots) {
    if (slot->device() == device) continue;
    const bool rg = slot->requires_grad();
    const MemTag tag = slot->storage()->tag();
    Tensor moved = slot->detach().to(device);
    moved.storage()->set_tag(tag);
    moved.set_requires_grad(rg);
    *slot = moved;
  }
}

void Module::to(DType dtype) {
  LB_CHECK(dtype_is_floating(dtype), "Module::to(", dtype_name(dtype), "): needs a floating dtype");
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots, true, true);
  for (auto& [_, slot] : slots) {
    if (!dtype_is_floating(slot->dtype()) || slot->dtype() == dtype) continue;
    const bool rg = slot->requires_grad();
    const MemTag tag = slot->storage()->tag();
    Tensor converted = slot->detach().to(dtype);
    converted.storage()->set_tag(tag);
    converted.set_requires_grad(rg);
    *slot = converted;
  }
}

void Module::zero_grad() {
  for (auto& [_, t] : named_parameters()) Tensor(t).zero_grad();
}

int64_t Module::set_trainable(const std::string& pattern, bool on) {
  std::vector<std::pair<std::string, Tensor*>> slots;
  collect_slots("", slots, true, false);
  int64_t n = 0;
  for (auto& [name, slot] : slots)
    if (glob_match(pattern, name)) {
      slot->set_requires_grad(on);
      if (!on) slot->zero_grad();
      ++n;
    }
  LB_CHECK(n > 0, "pattern '", pattern, "' matches no parameter (names look like '",
           slots.empty() ? std::string("<none>") : slots.front().first, "')");
  return n;
}

int64_t Module::freeze(const std::string& pattern) { return set_trainable(pattern, false); }
int64_t Module::unfreeze(const std::string& pattern) { return set_trainable(pattern, true); }

void Module::print(std::ostream& os, const std::string& name, int depth) const {
  int64_t own = 0;
  for (auto& [_, t] : params_) own += t->numel();
  os << std::string(depth * 2, ' ') << (name.empty() ? "" : "(" + name + "): ") << type_name();
  const std::string extra = extra_repr();
  if (!extra.empty()) os << "(" << extra << ")";
  if (own) os << "  [" << own << " params]";
  os << "\n";
  for (auto& [n, c] : children_) c->print(os, n, depth + 1);
}

std::string Module::tree() const {
  std::ostringstream os;
  print(os, "", 0);
  os << "total parameters: " << num_parameters() << " (trainable " << num_parameters(true) << ")\n";
  return os.str();
}

}  // namespace lb::nn
