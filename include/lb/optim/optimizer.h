// Optimizers hold parameters by name in groups (each with its own lr and weight decay) and
// update them in place with one fused loop per parameter. State (moments, momentum buffers,
// step count) is exposed by name for checkpoints.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/core/tensor.h"

namespace lb::optim {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct ParamGroup {
  NamedTensors params;
  double lr = 1e-3;
  double weight_decay = 0.0;
  double initial_lr = -1;  // set by the optimizer; schedules scale from it
};

// Splits parameters into a decayed group and a no-decay group: names matching any pattern in
// `no_decay` (globs over dotted names; default: biases and norm weights, as in the Hugging
// Face recipes) get weight_decay 0. Frozen parameters (requires_grad false) are skipped.
std::vector<ParamGroup> param_groups_with_decay(
    const NamedTensors& named, double lr, double weight_decay,
    const std::vector<std::string>& no_decay = {"*bias", "*LayerNorm.weight", "*layernorm*.weight",
                                                "*norm*.weight", "*bn*.weight", "*ln*.weight"});
// One group with everything trainable.
std::vector<ParamGroup> single_group(const NamedTensors& named, double lr, double weight_decay = 0);

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  virtual std::string type_name() const = 0;

  // Applies one update to every parameter that has a gradient.
  void step();
  // The same step one parameter at a time, as an optimizer step fused into backward applies
  // it: begin_step() counts the step, then update_parameter(leaf) updates the parameter whose
  // impl is `leaf` from its .grad and drops the gradient (false: not one of this optimizer's,
  // or no gradient).
  void begin_step();
  bool update_parameter(const TensorImpl* leaf);
  // A gradient given as rows (lb/autograd/row_sparse_grad.h: rows (K,) i64 distinct, values
  // (K, D)), as a fused step's embedding backward hands it over: the update is the dense
  // gradient's, zeros on every other row. takes_rows: `leaf` is one of this optimizer's (V, D)
  // parameters and it can. update_parameter_rows: a dense .grad the parameter also has is
  // summed with the rows first; the gradient is dropped after.
  bool takes_rows(const TensorImpl* leaf) const;
  void update_parameter_rows(const TensorImpl* leaf, const Tensor& rows, const Tensor& values);
  // The name of the parameter whose impl is `leaf` ("" when it is not one of this optimizer's).
  std::string parameter_name(const TensorImpl* leaf) const;
  void zero_grad();  // drops every .grad
  int64_t step_count() const { return step_count_; }

  std::vector<ParamGroup>& groups() { return groups_; }
  // Sets each group's lr to initial_lr * factor (what LR schedules call).
  void set_lr_factor(double factor);

  // Checkpoint state: hyperparameters + step as JSON, buffers as "<kind>.<param name>".
  virtual nlohmann::json hyperparams() const = 0;
  nlohmann::json state_json() const;
  NamedTensors state_tensors() const;
  // Restores from the two parts above; errors name the missing or mismatched entry.
  void load_state(const nlohmann::json& j, const std::map<std::string, Tensor>& tensors);

 protected:
  // Updates parameter `name`, p, with gradient g; `state` holds this parameter's buffers.
  virtual void update(const std::string& name, Tensor& p, const Tensor& g, const ParamGroup& group,
                      std::map<std::string, Tensor>& state) = 0;
  // The row-sparse update (default: none; takes_rows is false).
  virtual bool rows_supported(const Tensor& p) const;
  virtual void update_rows(const std::string& name, Tensor& p, const Tensor& rows, const Tensor& values,
                           const ParamGroup& group, std::map<std::string, Tensor>& state);
  virtual std::vector<std::string> state_kinds() const = 0;  // e.g. {"exp_avg", "exp_avg_sq"}
  // The shape and dtype of a parameter's buffer of one kind (default: the parameter's).
  virtual std::pair<Shape, DType> state_spec(const std::string& kind, const Tensor& p) const;
  // Refuses a checkpoint's state this optimizer cannot continue (e.g. another state width).
  virtual void check_saved_hyperparams(const nlohmann::json& saved) const;

  void update_checked(const std::string& name, Tensor& p, const Tensor& grad, const ParamGroup& group);

  std::vector<ParamGroup> groups_;
  // Each parameter's impl -> (group, index in it), for update_parameter.
  std::map<const TensorImpl*, std::pair<size_t, size_t>> index_;
  std::map<std::string, std::map<std::string, Tensor>> state_;  // param name -> kind -> buffer
  int64_t step_count_ = 0;
};

struct SgdOptions {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SgdOptions opts = {});
  std::string type_name() const override { return "sgd"; }
  nlohmann::json hyperparams() const override;

 protected:
  void update(const std::string& name, Tensor& p, const Tensor& g, const ParamGroup& group,
              std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_kinds() const override { return {"momentum_buffer"}; }

 private:
  SgdOptions opts_;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool decoupled = true;  // true: AdamW (decay applied to the weights); false: Adam (L2 in g)
  // Bits per element of m and v: 32 (f32, the reference), or 8 / 4 (block-wise dynamic
  // codes, lb/optim/state_codec.h; CPU, f32 parameters): each step decodes a block, updates
  // it as f32 Adam does and codes it again.
  int state_bits = 32;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions opts = {});
  std::string type_name() const override { return opts_.decoupled ? "adamw" : "adam"; }
  nlohmann::json hyperparams() const override;

 protected:
  void update(const std::string& name, Tensor& p, const Tensor& g, const ParamGroup& group,
              std::map<std::string, Tensor>& state) override;
  bool rows_supported(const Tensor& p) const override;
  void update_rows(const std::string& name, Tensor& p, const Tensor& rows, const Tensor& values,
                   const ParamGroup& group, std::map<std::string, Tensor>& state) override;
  // Coded state: "exp_avg" / "exp_avg_sq" hold the codes (u8), "<kind>.absmax" each block's A.
  std::vector<std::string> state_kinds() const override;
  std::pair<Shape, DType> state_spec(const std::string& kind, const Tensor& p) const override;
  void check_saved_hyperparams(const nlohmann::json& saved) const override;

 private:
  struct Grad;  // dense or row-sparse
  void apply(const std::string& name, Tensor& p, const Grad& g, const ParamGroup& group,
             std::map<std::string, Tensor>& state);
  AdamOptions opts_;
};

// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_): returns the norm before
// clipping; scales every gradient by max_norm / (norm + 1e-6) when that is below 1.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
// Its two parts for one gradient (a step fused into backward sees one gradient at a time).
double grad_sum_squares(const Tensor& g);
void scale_grad(Tensor& g, double coef);

}  // namespace lb::optim
