// ResNet-18/34/50 in the torchvision layout (conv1, bn1, layer1..4 of BasicBlock or
// Bottleneck with downsample.0/.1, fc), with an option for the CIFAR stem (3×3 stride-1
// conv1 and no max-pool).
#pragma once
#include <nlohmann/json.hpp>

#include "lb/nn/layers.h"
#include "lb/nn/recomputable_block.h"

namespace lb::models {

struct ResNetConfig {
  int64_t depth = 18;  // 18, 34 or 50
  int64_t num_classes = 1000;
  bool cifar_stem = false;
  int64_t base_width = 64;  // channels of the stem and layer1 (torchvision: 64)
  static ResNetConfig from_json(const nlohmann::json& j, const std::string& path);
  nlohmann::json to_json() const;
};

class ResNetBlock : public nn::RecomputableBlock {
 public:
  ResNetBlock(int64_t in, int64_t planes, int64_t stride, bool bottleneck);
  std::string type_name() const override { return bottleneck_ ? "Bottleneck" : "BasicBlock"; }
  Tensor forward(const Tensor& x);
  static constexpr int64_t expansion(bool bottleneck) { return bottleneck ? 4 : 1; }

 private:
  Tensor block(const Tensor& x);
  bool bottleneck_;
  std::shared_ptr<nn::Conv2d> conv1_, conv2_, conv3_, down_conv_;
  std::shared_ptr<nn::BatchNorm2d> bn1_, bn2_, bn3_, down_bn_;
};

class ResNet : public nn::Module {
 public:
  explicit ResNet(const ResNetConfig& c);
  std::string type_name() const override { return "ResNet"; }
  struct Output {
    Tensor logits, loss;
  };
  Output forward(const Tensor& images, const Tensor& labels = Tensor(), double label_smoothing = 0.0);
  const ResNetConfig& config() const { return config_; }

 private:
  ResNetConfig config_;
  std::shared_ptr<nn::Conv2d> conv1_;
  std::shared_ptr<nn::BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<ResNetBlock>> blocks_;
  std::shared_ptr<nn::Linear> fc_;
};

}  // namespace lb::models
