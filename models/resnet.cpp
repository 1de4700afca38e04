// ResNet (He et al. 2016), torchvision resnet.py layout and initialisation.
#include "models/resnet.h"

#include "lb/autograd/module_scope.h"
#include "lb/nn/init.h"
#include "models/hf_config.h"
#include "models/model_size.h"

namespace lb::models {

namespace {
std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  Conv2dArgs a;
  a.stride = {stride, stride};
  a.padding = {pad, pad};
  return std::make_shared<nn::Conv2d>(in, out, k, a, /*bias=*/false);
}

// The parameters and BatchNorm statistics ResNet(c) allocates, counted before it does, as
// the constructor builds them (a base_width of 2^40 must be an error, not a wrapped size).
ParamCount parameter_count(const ResNetConfig& c) {
  const int64_t w = c.base_width;
  const bool bottleneck = c.depth == 50;
  const int64_t expansion = bottleneck ? 4 : 1;
  const int64_t counts[4] = {c.depth == 18 ? 2 : 3, c.depth == 18 ? 2 : 4, c.depth == 18 ? 2 : 6,
                             c.depth == 18 ? 2 : 3};
  ParamCount n;
  n.add({3, w, c.cifar_stem ? 9 : 49}).add({4, w});
  int64_t in = w;
  for (int64_t stage = 0; stage < 4; ++stage) {
    if (w > (int64_t{1} << 40)) return n.add({INT64_MAX, INT64_MAX});  // planes would overflow
    const int64_t planes = w << stage, out = planes * expansion;
    ParamCount block;
    if (bottleneck) block.add({in, planes}).add({planes, planes, 9}).add({planes, out}).add({8, planes}).add({4, out});
    else block.add({in, planes, 9}).add({planes, planes, 9}).add({8, planes});
    block.add({in, out}).add({4, out});  // downsample, counted for every block: an upper bound
    n.add_times(block, counts[stage]);
    in = out;
  }
  return n.add({in, c.num_classes}).add({c.num_classes});
}
}  // namespace

ResNetConfig ResNetConfig::from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object(), path, ": expected a JSON object");
  ResNetConfig c;
  for (auto it = j.begin(); it != j.end(); ++it)
    LB_CHECK(it.key() == "depth" || it.key() == "num_classes" || it.key() == "cifar_stem" ||
                 it.key() == "base_width" ||
                 it.key() == "model_type",
             path, ": unknown key '", it.key(), "'; valid: depth, num_classes, cifar_stem, base_width");
  c.depth = hf::get_int(j, path, "depth", c.depth, 1);
  LB_CHECK(c.depth == 18 || c.depth == 34 || c.depth == 50, path, ".depth: must be 18, 34 or 50, got ", c.depth);
  c.num_classes = hf::get_int(j, path, "num_classes", c.num_classes, 1);
  c.base_width = hf::get_int(j, path, "base_width", c.base_width, 1);
  if (j.contains("cifar_stem")) {
    LB_CHECK(j.at("cifar_stem").is_boolean(), path, ".cifar_stem: expected true or false");
    c.cifar_stem = j.at("cifar_stem").get<bool>();
  }
  check_parameters_fit(parameter_count(c), path,
                       "depth " + std::to_string(c.depth) + ", base_width " + std::to_string(c.base_width) +
                           ", num_classes " + std::to_string(c.num_classes));
  return c;
}

nlohmann::json ResNetConfig::to_json() const {
  return {{"model_type", "resnet"}, {"depth", depth}, {"num_classes", num_classes}, {"cifar_stem", cifar_stem},
          {"base_width", base_width}};
}

ResNetBlock::ResNetBlock(int64_t in, int64_t planes, int64_t stride, bool bottleneck)
    : bottleneck_(bottleneck) {
  const int64_t out = planes * expansion(bottleneck);
  if (bottleneck) {
    // torchvision v1.5: the stride sits on the 3×3 conv.
    conv1_ = register_module("conv1", conv(in, planes, 1, 1, 0));
    bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, stride, 1));
    bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
    conv3_ = register_module("conv3", conv(planes, out, 1, 1, 0));
    bn3_ = register_module("bn3", std::make_shared<nn::BatchNorm2d>(out));
  } else {
    conv1_ = register_module("conv1", conv(in, planes, 3, stride, 1));
    bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
    conv2_ = register_module("conv2", conv(planes, planes, 3, 1, 1));
    bn2_ = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
  }
  if (stride != 1 || in != out) {
    auto down = register_module("downsample", std::make_shared<nn::Container>("Sequential"));
    down_conv_ = down->add("0", conv(in, out, 1, stride, 0));
    down_bn_ = down->add("1", std::make_shared<nn::BatchNorm2d>(out));
  }
}

Tensor ResNetBlock::forward(const Tensor& x) {
  return run_block(x, [this](const Tensor& xi) { return block(xi); });
}

Tensor ResNetBlock::block(const Tensor& x) {
  Tensor y = relu(bn1_->forward(conv1_->forward(x)));
  if (bottleneck_) {
    y = relu(bn2_->forward(conv2_->forward(y)));
    y = bn3_->forward(conv3_->forward(y));
  } else {
    y = bn2_->forward(conv2_->forward(y));
  }
  const Tensor identity = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
  return relu(add(y, identity));
}

ResNet::ResNet(const ResNetConfig& c) : config_(c) {
  const int64_t w = c.base_width;
  conv1_ = register_module("conv1", c.cifar_stem ? conv(3, w, 3, 1, 1) : conv(3, w, 7, 2, 3));
  bn1_ = register_module("bn1", std::make_shared<nn::BatchNorm2d>(w));
  const bool bottleneck = c.depth == 50;
  const std::vector<int64_t> counts = c.depth == 18 ? std::vector<int64_t>{2, 2, 2, 2}
                                                    : std::vector<int64_t>{3, 4, 6, 3};
  int64_t in = w;
  for (int64_t stage = 0; stage < 4; ++stage) {
    auto layer = register_module("layer" + std::to_string(stage + 1), std::make_shared<nn::ModuleList>());
    const int64_t planes = w << stage;
    for (int64_t b = 0; b < counts[stage]; ++b) {
      const int64_t stride = (b == 0 && stage > 0) ? 2 : 1;
      blocks_.push_back(layer->push_back(std::make_shared<ResNetBlock>(in, planes, stride, bottleneck)));
      in = planes * ResNetBlock::expansion(bottleneck);
    }
  }
  fc_ = register_module("fc", std::make_shared<nn::Linear>(in, c.num_classes));
  // torchvision: kaiming_normal(fan_out, relu) for convs; BN (1, 0); fc keeps Linear's default.
  for (auto& [name, p] : named_parameters()) {
    if (p.dim() == 4) nn::init::kaiming_normal_fan_out_(p, p.size(0) * p.size(2) * p.size(3));
  }
}

ResNet::Output ResNet::forward(const Tensor& images, const Tensor& labels, double label_smoothing) {
  LB_CHECK(images.dim() == 4 && images.size(1) == 3, "ResNet expects images (B, 3, H, W), got ",
           shape_str(images.shape()));
  Tensor x = relu(bn1_->forward(conv1_->forward(images)));
  if (!config_.cifar_stem) {
    Pool2dArgs pool;
    pool.kernel = {3, 3};
    pool.stride = {2, 2};
    pool.padding = {1, 1};
    x = max_pool2d(x, pool);
  }
  for (auto& b : blocks_) x = b->forward(x);
  x = adaptive_avg_pool2d(x, 1, 1).flatten(1);
  Output out;
  out.logits = fc_->forward(x);
  if (labels.defined()) out.loss = cross_entropy(out.logits, labels.to(DType::I64), -100, label_smoothing);
  return out;
}

}  // namespace lb::models
