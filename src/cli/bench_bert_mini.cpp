// Workloads bert_mini (docs/design.md "Benchmark workloads") and bert_base:
// BertForSequenceClassification with L=4, H=256, 4 heads, FFN 1024 (bert_base: L=12, H=768,
// 12 heads, FFN 3072), vocab 30522, dropout 0.1 (Hugging Face defaults), on one fixed batch of
// 32 sequences of 128 random token ids (attention mask all ones, 2 labels), AdamW (lr 1e-4,
// weight decay 0.01 on every parameter, torch.optim.AdamW's default). One step = forward +
// cross-entropy, backward, optimizer step, zero_grad. tools/bench/bert_mini.py is the PyTorch /
// transformers twin (--size base; --device cuda --autocast for the GPU target).
#include <random>

#include "lb/core/random.h"
#include "models/bert.h"
#include "src/cli/bench_train_step.h"

namespace lb::cli {

namespace {

nlohmann::json bench_bert(const std::string& name, const models::BertConfig& c, const BenchOptions& opt) {
  constexpr int64_t kB = 32, kT = 128;
  manual_seed(0);
  models::BertForSequenceClassification model(c);
  model.train();
  const StrategyList strategies = apply_bench_strategy(model, opt);
  model.to(opt.device);

  std::mt19937_64 rng(0);
  std::vector<int64_t> ids(kB * kT), labels(kB);
  for (auto& v : ids) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.vocab_size));
  for (auto& v : labels) v = static_cast<int64_t>(rng() % 2);
  const Tensor input_ids = Tensor::from_vector(ids, {kB, kT}).to(opt.device);
  const Tensor label_t = Tensor::from_vector(labels, {kB}).to(opt.device);
  const Tensor keep = Tensor::ones({kB, kT}, DType::I64).to(opt.device);

  optim::Adam adamw(optim::single_group(model.named_parameters(), 1e-4, 0.01));
  const TrainStepTimes t = time_train_steps(
      opt, model, kB, [&] { return model.forward(input_ids, Tensor(), keep, label_t).loss; }, adamw,
      strategies);
  return train_step_json(
      name, opt, t, model.num_parameters(),
      {{"model", {{"layers", c.num_hidden_layers}, {"hidden", c.hidden_size},
                  {"heads", c.num_attention_heads}, {"ffn", c.intermediate_size},
                  {"vocab", c.vocab_size}, {"dropout", c.hidden_dropout_prob}}},
       {"batch", {{"B", kB}, {"T", kT}}},
       {"optimizer", "adamw"}},
      strategies);
}

}  // namespace

nlohmann::json bench_bert_mini(const BenchOptions& opt) {
  models::BertConfig c;
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.intermediate_size = 1024;
  c.num_labels = 2;
  return bench_bert("bert_mini", c, opt);
}

nlohmann::json bench_bert_base(const BenchOptions& opt) {
  models::BertConfig c;  // the defaults are bert-base's
  c.num_labels = 2;
  return bench_bert("bert_base", c, opt);
}

}  // namespace lb::cli
