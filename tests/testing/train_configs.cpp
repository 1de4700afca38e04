#include "testing/train_configs.h"

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

}  // namespace lb::testing
