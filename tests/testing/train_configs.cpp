#include "testing/train_configs.h"

#include <stb_image_write.h>

#include <fstream>
#include <string>
#include <vector>

#include "lb/core/error.h"
#include "lb/core/philox.h"

namespace lb::testing {

nlohmann::json tiny_bert_config(int64_t steps, double dropout) {
  return {{"model",
           {{"type", "bert"},
            {"hidden_size", 32},
            {"num_hidden_layers", 2},
            {"num_attention_heads", 2},
            {"intermediate_size", 64},
            {"max_position_embeddings", 32},
            {"hidden_dropout_prob", dropout},
            {"attention_probs_dropout_prob", dropout}}},
          {"data",
           {{"task", "synthetic"}, {"max_seq_len", 32}, {"padding", "max_length"}, {"batch_size", 8},
            {"synthetic_train", 64}, {"synthetic_eval", 32}}},
          {"train", {{"max_steps", steps}, {"log_every", 2}, {"seed", 7}}},
          {"optimizer", {{"type", "adamw"}, {"lr", 2e-3}, {"weight_decay", 0.01}}},
          {"schedule", {{"type", "linear"}, {"warmup_steps", 1}}}};
}

train::TrainOptions quiet(const std::string& out) {
  train::TrainOptions o;
  o.out_dir = out;
  o.quiet = true;
  o.progress = 0;
  return o;
}

void write_image_folder(const std::filesystem::path& root) {
  PhiloxStream rng(11);
  for (const std::string split : {"train", "test"})
    for (int c = 0; c < 2; ++c) {
      const std::filesystem::path dir = root / split / (c == 0 ? "cold" : "warm");
      std::filesystem::create_directories(dir);
      for (int i = 0; i < (split == "train" ? 48 : 16); ++i) {
        std::vector<uint8_t> px(8 * 8 * 3);
        for (int p = 0; p < 64; ++p) {
          const int noise = static_cast<int>(rng.next_u32() % 60);
          px[p * 3 + 0] = static_cast<uint8_t>((c ? 170 : 40) + noise);
          px[p * 3 + 1] = static_cast<uint8_t>(90 + noise);
          px[p * 3 + 2] = static_cast<uint8_t>((c ? 40 : 170) + noise);
        }
        const std::string f = (dir / (std::to_string(i) + ".png")).string();
        LB_CHECK(stbi_write_png(f.c_str(), 8, 8, 3, px.data(), 8 * 3), "could not write ", f);
      }
    }
}

namespace {
nlohmann::json image_config(nlohmann::json model, const std::string& dir, int64_t steps, nlohmann::json optimizer) {
  nlohmann::json train = {{"log_every", 2}, {"seed", 3}};
  if (steps > 0) train["max_steps"] = steps;
  else train["epochs"] = 4;
  return {{"model", std::move(model)},
          {"data", {{"task", "image_folder"}, {"dir", dir}, {"batch_size", 16}, {"workers", 2},
                    {"random_crop_padding", 1}, {"horizontal_flip", true}}},
          {"train", train},
          {"optimizer", std::move(optimizer)},
          {"schedule", {{"type", "constant"}}}};
}
}  // namespace

nlohmann::json tiny_resnet_config(const std::string& dir, int64_t steps) {
  return image_config({{"type", "resnet"}, {"depth", 18}, {"cifar_stem", true}, {"base_width", 4}}, dir, steps,
                      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}});
}

nlohmann::json tiny_vit_config(const std::string& dir, int64_t steps) {
  return image_config({{"type", "vit"}, {"image_size", 8}, {"patch_size", 2}, {"hidden_size", 32},
                       {"num_hidden_layers", 2}, {"num_attention_heads", 2}, {"intermediate_size", 64}},
                      dir, steps, {{"type", "adamw"}, {"lr", 1e-3}});
}

models::BertConfig golden_bert_config(int64_t num_labels) {
  models::BertConfig c;
  c.vocab_size = 50;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = 16;
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  c.num_labels = num_labels;
  return c;
}

std::vector<nlohmann::json> train_lines(const std::string& run) {
  std::vector<nlohmann::json> out;
  std::ifstream in(run + "/metrics.jsonl");
  for (std::string l; std::getline(in, l);)
    if (auto j = nlohmann::json::parse(l); j["type"] == "train") out.push_back(j);
  return out;
}

}  // namespace lb::testing
