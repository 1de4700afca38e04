// Basic layers (PyTorch semantics, state_dict names and default initialisation):
// Linear, Conv2d, LayerNorm, BatchNorm2d, Embedding, Dropout, activations, pooling.
// Each layer's forward is a composition of differentiable ops from lb/ops.h.
#pragma once
#include <array>
#include <string>

#include "lb/nn/backward/strategy.h"
#include "lb/nn/lora.h"
#include "lb/nn/module.h"
#include "lb/ops.h"

namespace lb::nn {

// y = x wᵀ + b; weight (out, in), bias (out).
class Dropout;

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  // `call`: what the backward strategy needs to know of this call (a padding-free batch's
  // sequences, an input shared with sibling layers); nothing without a strategy.
  Tensor forward(const Tensor& x, const backward::CallContext& call = {});
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  // The backward strategy (see nn/backward/policy.h); null means the plain exact op.
  void set_backward(std::shared_ptr<backward::Strategy> s) { backward_ = std::move(s); }
  const std::shared_ptr<backward::Strategy>& backward_strategy() const { return backward_; }

  // LoRA (lora.h): adds the adapter (children lora_A, lora_B and, with dropout, lora_dropout)
  // and freezes the weight; the bias stays as it was (the caller decides, lora.bias).
  void add_lora(const LoraSettings& settings);
  bool has_lora() const { return lora_A_ != nullptr; }
  const LoraSettings& lora_settings() const { return lora_; }
  LoraFactor& lora_A() { return *lora_A_; }
  LoraFactor& lora_B() { return *lora_B_; }
  // W += (alpha / r) B A, and the adapter is skipped until unmerge_lora() takes it out again.
  void merge_lora();
  void unmerge_lora();
  bool lora_merged() const { return lora_merged_; }

 private:
  int64_t in_, out_;
  Tensor weight_, bias_;
  std::shared_ptr<backward::Strategy> backward_;
  LoraSettings lora_;
  std::shared_ptr<LoraFactor> lora_A_, lora_B_;
  std::shared_ptr<Dropout> lora_dropout_;
  bool lora_merged_ = false;
};

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, const Conv2dArgs& args = {},
         bool bias = true);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x);
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }
  const Conv2dArgs& args() const { return args_; }
  void set_backward(std::shared_ptr<backward::Strategy> s) { backward_ = std::move(s); }
  const std::shared_ptr<backward::Strategy>& backward_strategy() const { return backward_; }

 private:
  int64_t in_, out_, kernel_;
  Conv2dArgs args_;
  Tensor weight_, bias_;
  std::shared_ptr<backward::Strategy> backward_;
};

// The backward strategy of a Linear or Conv2d (null for other modules, or none set), and
// setting it (false: `m` is neither).
std::shared_ptr<backward::Strategy> backward_strategy_of(Module& m);
bool set_backward_strategy(Module& m, std::shared_ptr<backward::Strategy> s);

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x);
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  int64_t dim_;
  double eps_;
  Tensor weight_, bias_;
};

class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1);
  std::string type_name() const override { return "BatchNorm2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x);
  Tensor& weight() { return weight_; }
  Tensor& bias() { return bias_; }

 private:
  int64_t channels_;
  double eps_, momentum_;
  Tensor weight_, bias_, running_mean_, running_var_, num_batches_tracked_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, int64_t padding_idx = -1);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& indices);
  Tensor& weight() { return weight_; }

 private:
  int64_t num_, dim_, padding_idx_;
  Tensor weight_;
};

// Dropout draws from the default generator (its position is saved in checkpoints).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.1);
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x);

 private:
  double p_;
};

enum class Activation { Relu, Gelu, GeluTanh, Tanh };
Activation activation_from_name(const std::string& name);  // HF hidden_act names
Tensor apply_activation(const Tensor& x, Activation a);

class ActivationLayer : public Module {
 public:
  explicit ActivationLayer(Activation a) : act_(a) {}
  std::string type_name() const override;
  Tensor forward(const Tensor& x) { return apply_activation(x, act_); }

 private:
  Activation act_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(const Pool2dArgs& args) : args_(args) {}
  std::string type_name() const override { return "MaxPool2d"; }
  Tensor forward(const Tensor& x) { return max_pool2d(x, args_); }

 private:
  Pool2dArgs args_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(const Pool2dArgs& args) : args_(args) {}
  std::string type_name() const override { return "AvgPool2d"; }
  Tensor forward(const Tensor& x) { return avg_pool2d(x, args_); }

 private:
  Pool2dArgs args_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : h_(out_h), w_(out_w) {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  Tensor forward(const Tensor& x) { return adaptive_avg_pool2d(x, h_, w_); }

 private:
  int64_t h_, w_;
};

}  // namespace lb::nn
