// Workload resnet18 (docs/design.md "Benchmark workloads"): torchvision-layout ResNet-18 with the
// CIFAR stem (3×3 stride-1 conv1, no max-pool), 10 classes, BatchNorm in training mode, on
// one fixed batch of 64 N(0, 1) 32×32×3 images, SGD (lr 0.1, momentum 0.9, weight decay
// 5e-4). One step = forward + cross-entropy, backward, optimizer step, zero_grad.
// tools/bench/resnet18.py is the PyTorch / torchvision twin.
#include <random>

#include "lb/core/random.h"
#include "lb/nn/init.h"
#include "models/resnet.h"
#include "src/cli/bench_train_step.h"

namespace lb::cli {

nlohmann::json bench_resnet18(const BenchOptions& opt) {
  constexpr int64_t kB = 64, kHW = 32;
  models::ResNetConfig c;
  c.depth = 18;
  c.num_classes = 10;
  c.cifar_stem = true;
  manual_seed(0);
  models::ResNet model(c);
  model.train();
  const StrategyList strategies = apply_bench_strategy(model, opt);
  model.to(opt.device);  // the model and its batch on --device (the JSON reports it)

  Tensor images = Tensor::empty({kB, 3, kHW, kHW});
  nn::init::normal_(images, 0.0, 1.0);
  images = images.to(opt.device);
  std::mt19937_64 rng(0);
  std::vector<int64_t> labels(kB);
  for (auto& v : labels) v = static_cast<int64_t>(rng() % 10);
  const Tensor label_t = Tensor::from_vector(labels, {kB}).to(opt.device);

  optim::SgdOptions so;
  so.momentum = 0.9;
  optim::SGD sgd(optim::single_group(model.named_parameters(), 0.1, 5e-4), so);
  const TrainStepTimes t =
      time_train_steps(opt, model, kB, [&] { return model.forward(images, label_t).loss; }, sgd, strategies);
  return train_step_json("resnet18", opt, t, model.num_parameters(),
                         {{"model", {{"depth", 18}, {"cifar_stem", true}, {"classes", 10}}},
                          {"batch", {{"B", kB}, {"image", kHW}}},
                          {"optimizer", "sgd_momentum"}},
                         strategies);
}

}  // namespace lb::cli
