// Basic layers: construction (PyTorch default initialisation) and forward.
#include "lb/nn/layers.h"

#include <sstream>

#include "lb/autograd/grad_mode.h"
#include "lb/autograd/module_scope.h"
#include "lb/autograd/recompute.h"
#include "lb/core/random.h"
#include "lb/nn/init.h"

namespace lb::nn {

namespace {
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace

// ---------------------------------------------------------------- Linear
Linear::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out) {
  LB_CHECK(in > 0 && out > 0, "Linear(", in, ", ", out, "): sizes must be positive");
  weight_ = Tensor::empty({out, in});
  init::kaiming_uniform_default_(weight_, in);
  register_parameter("weight", &weight_);
  if (bias) {
    bias_ = Tensor::empty({out});
    init::kaiming_uniform_default_(bias_, in);
    register_parameter("bias", &bias_);
  }
}

std::string Linear::extra_repr() const {
  return cat(in_, " -> ", out_, bias_.defined() ? "" : ", no bias",
             backward_ ? ", backward " + backward_->type() : "");
}

Tensor Linear::forward(const Tensor& x, const backward::CallContext& call) {
  const autograd::ModuleScope scope(path());
  LB_CHECK(x.dim() >= 1 && x.size(-1) == in_, "Linear(", in_, " -> ", out_, "): input ",
           shape_str(x.shape()), " must end in ", in_);
  // Strategies apply while training; evaluation runs the plain op (nothing is saved anyway).
  Tensor y = backward_ && is_training() ? backward::strategy_linear(x, weight_, bias_, backward_, call)
                                         : linear(x, weight_, bias_);
  if (!lora_A_ || lora_merged_) return y;
  Tensor h;
  {
    // dropout then A in one op that keeps x once (shared with the sibling adapters and with
    // x's producer), not each adapter's dropped-out copy; the same draws as lora_dropout's.
    const autograd::ModuleScope adapter(lora_A_->path());
    const bool drop = lora_dropout_ && lora_dropout_->is_training();
    h = dropout_linear(x, lora_A_->weight(), drop ? lora_.dropout : 0.0, drop, default_generator());
  }
  const autograd::ModuleScope adapter(lora_B_->path());
  return add(y, mul_scalar(linear(h, lora_B_->weight()), lora_.scale()));
}

void Linear::add_lora(const LoraSettings& s) {
  LB_CHECK(!lora_A_, "Linear ", path(), ": already has a LoRA adapter");
  LB_CHECK(s.r >= 1 && s.alpha > 0 && s.dropout >= 0 && s.dropout < 1, "Linear ", path(), ": LoRA r ", s.r,
           ", alpha ", s.alpha, ", dropout ", s.dropout, ": r >= 1, alpha > 0, 0 <= dropout < 1");
  lora_ = s;
  lora_A_ = register_module("lora_A", std::make_shared<LoraFactor>(s.r, in_));
  init::kaiming_uniform_default_(lora_A_->weight(), in_);  // PEFT: kaiming_uniform_(a=√5)
  lora_B_ = register_module("lora_B", std::make_shared<LoraFactor>(out_, s.r));  // zeros
  if (s.dropout > 0) lora_dropout_ = register_module("lora_dropout", std::make_shared<Dropout>(s.dropout));
  weight_.set_requires_grad(false);
}

void Linear::merge_lora() {
  LB_CHECK(lora_A_, "Linear ", path(), ": no LoRA adapter to merge");
  if (lora_merged_) return;
  const NoGradGuard no_grad;
  add_(weight_, matmul(lora_B_->weight(), lora_A_->weight()), lora_.scale());
  lora_merged_ = true;
}

void Linear::unmerge_lora() {
  LB_CHECK(lora_A_, "Linear ", path(), ": no LoRA adapter to unmerge");
  if (!lora_merged_) return;
  const NoGradGuard no_grad;
  add_(weight_, matmul(lora_B_->weight(), lora_A_->weight()), -lora_.scale());
  lora_merged_ = false;
}

// ---------------------------------------------------------------- LoraFactor
LoraFactor::LoraFactor(int64_t rows, int64_t cols) {
  LB_CHECK(rows > 0 && cols > 0, "LoraFactor(", rows, ", ", cols, "): sizes must be positive");
  weight_ = Tensor::zeros({rows, cols});
  register_parameter("weight", &weight_);
}

std::string LoraFactor::extra_repr() const { return cat(weight_.size(1), " -> ", weight_.size(0)); }

// ---------------------------------------------------------------- Conv2d
Conv2d::Conv2d(int64_t in, int64_t out, int64_t kernel, const Conv2dArgs& args, bool bias)
    : in_(in), out_(out), kernel_(kernel), args_(args) {
  LB_CHECK(in > 0 && out > 0 && kernel > 0 && args.groups > 0 && in % args.groups == 0 &&
               out % args.groups == 0,
           "Conv2d(", in, ", ", out, ", kernel ", kernel, ", groups ", args.groups,
           "): sizes must be positive and channels divisible by groups");
  const int64_t fan_in = in / args.groups * kernel * kernel;
  weight_ = Tensor::empty({out, in / args.groups, kernel, kernel});
  init::kaiming_uniform_default_(weight_, fan_in);
  register_parameter("weight", &weight_);
  if (bias) {
    bias_ = Tensor::empty({out});
    init::kaiming_uniform_default_(bias_, fan_in);
    register_parameter("bias", &bias_);
  }
}

std::string Conv2d::extra_repr() const {
  return cat(in_, " -> ", out_, ", k", kernel_, ", s", args_.stride[0], ", p", args_.padding[0],
             args_.groups > 1 ? cat(", groups ", args_.groups) : "", bias_.defined() ? "" : ", no bias");
}

Tensor Conv2d::forward(const Tensor& x) {
  const autograd::ModuleScope scope(path());
  if (backward_ && is_training()) return backward::strategy_conv2d(x, weight_, bias_, args_, backward_);
  return conv2d(x, weight_, bias_, args_);
}

std::shared_ptr<backward::Strategy> backward_strategy_of(Module& m) {
  if (auto* lin = dynamic_cast<Linear*>(&m)) return lin->backward_strategy();
  if (auto* conv = dynamic_cast<Conv2d*>(&m)) return conv->backward_strategy();
  return nullptr;
}

bool set_backward_strategy(Module& m, std::shared_ptr<backward::Strategy> s) {
  if (auto* lin = dynamic_cast<Linear*>(&m)) lin->set_backward(std::move(s));
  else if (auto* conv = dynamic_cast<Conv2d*>(&m)) conv->set_backward(std::move(s));
  else return false;
  return true;
}

// ---------------------------------------------------------------- LayerNorm
LayerNorm::LayerNorm(int64_t dim, double eps) : dim_(dim), eps_(eps) {
  weight_ = Tensor::ones({dim});
  bias_ = Tensor::zeros({dim});
  register_parameter("weight", &weight_);
  register_parameter("bias", &bias_);
}

std::string LayerNorm::extra_repr() const { return cat(dim_, ", eps ", eps_); }

Tensor LayerNorm::forward(const Tensor& x) {
  const autograd::ModuleScope scope(path());
  return layer_norm(x, weight_, bias_, eps_);
}

// ---------------------------------------------------------------- BatchNorm2d
BatchNorm2d::BatchNorm2d(int64_t c, double eps, double momentum)
    : channels_(c), eps_(eps), momentum_(momentum) {
  weight_ = Tensor::ones({c});
  bias_ = Tensor::zeros({c});
  running_mean_ = Tensor::zeros({c});
  running_var_ = Tensor::ones({c});
  num_batches_tracked_ = Tensor::zeros({}, DType::I64);
  register_parameter("weight", &weight_);
  register_parameter("bias", &bias_);
  register_buffer("running_mean", &running_mean_);
  register_buffer("running_var", &running_var_);
  register_buffer("num_batches_tracked", &num_batches_tracked_);
}

std::string BatchNorm2d::extra_repr() const { return cat(channels_, ", eps ", eps_); }

Tensor BatchNorm2d::forward(const Tensor& x) {
  const autograd::ModuleScope scope(path());
  LB_CHECK(x.dim() == 4 && x.size(1) == channels_, "BatchNorm2d(", channels_, "): input ",
           shape_str(x.shape()), " must be (N, ", channels_, ", H, W)");
  // A recomputed forward (memory.recompute) normalises as the first did and leaves the running
  // statistics as the first left them.
  if (is_training() && autograd::recomputing())
    return batch_norm(x, weight_, bias_, Tensor(), Tensor(), true, momentum_, eps_);
  if (is_training()) num_batches_tracked_.fill_(num_batches_tracked_.item_double() + 1);
  return batch_norm(x, weight_, bias_, running_mean_, running_var_, is_training(), momentum_, eps_);
}

// ---------------------------------------------------------------- Embedding
Embedding::Embedding(int64_t num, int64_t dim, int64_t padding_idx)
    : num_(num), dim_(dim), padding_idx_(padding_idx) {
  weight_ = Tensor::empty({num, dim});
  init::normal_(weight_, 0.0, 1.0);
  if (padding_idx >= 0) weight_.select(0, padding_idx).fill_(0.0);
  register_parameter("weight", &weight_);
}

std::string Embedding::extra_repr() const { return cat(num_, ", ", dim_); }

Tensor Embedding::forward(const Tensor& indices) {
  const autograd::ModuleScope scope(path());
  return embedding(indices, weight_, padding_idx_);
}

// ---------------------------------------------------------------- Dropout
Dropout::Dropout(double p) : p_(p) {
  LB_CHECK(p >= 0.0 && p < 1.0, "Dropout probability ", p, " must be in [0, 1)");
}

std::string Dropout::extra_repr() const { return cat("p=", p_); }

Tensor Dropout::forward(const Tensor& x) {
  const autograd::ModuleScope scope(path());
  if (!is_training() || p_ == 0.0) return x;
  return dropout(x, p_, true, default_generator());
}

// ---------------------------------------------------------------- activations
Activation activation_from_name(const std::string& n) {
  if (n == "relu") return Activation::Relu;
  if (n == "gelu") return Activation::Gelu;
  if (n == "gelu_new" || n == "gelu_pytorch_tanh") return Activation::GeluTanh;
  if (n == "tanh") return Activation::Tanh;
  LB_FAIL("unknown activation '", n, "'; valid: relu, gelu, gelu_new, gelu_pytorch_tanh, tanh");
}

Tensor apply_activation(const Tensor& x, Activation a) {
  switch (a) {
    case Activation::Relu: return relu(x);
    case Activation::Gelu: return gelu(x);
    case Activation::GeluTanh: return gelu(x, GeluApprox::Tanh);
    case Activation::Tanh: return tanh(x);
  }
  return x;
}

std::string ActivationLayer::type_name() const {
  switch (act_) {
    case Activation::Relu: return "ReLU";
    case Activation::Gelu: return "GELU";
    case Activation::GeluTanh: return "GELU(tanh)";
    case Activation::Tanh: return "Tanh";
  }
  return "?";
}

}  // namespace lb::nn
