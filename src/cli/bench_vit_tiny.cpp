// Workload vit_tiny (docs/design.md "Benchmark workloads"): ViTForImageClassification with depth
// 12, dim 192, 3 heads, FFN 768, patch 4 on 32×32×3 images (64 patches + CLS), 10 classes,
// no dropout (Hugging Face ViT defaults), on one fixed batch of 64 N(0, 1) images, AdamW
// (lr 1e-4, weight decay 0.01 on every parameter). One step = forward + cross-entropy,
// backward, optimizer step, zero_grad. tools/bench/vit_tiny.py is the PyTorch twin.
#include <random>

#include "lb/core/random.h"
#include "lb/nn/init.h"
#include "models/vit.h"
#include "src/cli/bench_train_step.h"

namespace lb::cli {

nlohmann::json bench_vit_tiny(const BenchOptions& opt) {
  constexpr int64_t kB = 64;
  models::ViTConfig c;
  c.image_size = 32;
  c.patch_size = 4;
  c.hidden_size = 192;
  c.num_hidden_layers = 12;
  c.num_attention_heads = 3;
  c.intermediate_size = 768;
  c.num_labels = 10;
  manual_seed(0);
  models::ViTForImageClassification model(c);
  model.train();
  const StrategyList strategies = apply_bench_strategy(model, opt);
  model.to(opt.device);  // the model and its batch on --device (the JSON reports it)

  Tensor pixels = Tensor::empty({kB, 3, c.image_size, c.image_size});
  nn::init::normal_(pixels, 0.0, 1.0);
  pixels = pixels.to(opt.device);
  std::mt19937_64 rng(0);
  std::vector<int64_t> labels(kB);
  for (auto& v : labels) v = static_cast<int64_t>(rng() % 10);
  const Tensor label_t = Tensor::from_vector(labels, {kB}).to(opt.device);

  optim::Adam adamw(optim::single_group(model.named_parameters(), 1e-4, 0.01));
  const TrainStepTimes t =
      time_train_steps(opt, model, kB, [&] { return model.forward(pixels, label_t).loss; }, adamw, strategies);
  return train_step_json(
      "vit_tiny", opt, t, model.num_parameters(),
      {{"model", {{"layers", c.num_hidden_layers}, {"hidden", c.hidden_size},
                  {"heads", c.num_attention_heads}, {"ffn", c.intermediate_size},
                  {"patch", c.patch_size}, {"image", c.image_size}}},
       {"batch", {{"B", kB}}},
       {"optimizer", "adamw"}},
      strategies);
}

}  // namespace lb::cli
