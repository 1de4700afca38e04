// Small training configs shared by the trainer and compare tests.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/train/trainer.h"
#include "models/bert.h"

namespace lb::testing {

// A 2-layer BERT (hidden 32) on the program's synthetic text task: `steps` optimizer steps
// of batch 8 (0: leave the length to the caller), max_length padding to 32, AdamW.
nlohmann::json tiny_bert_config(int64_t steps, double dropout = 0.1);

// Training options for tests: run directory `out`, no log lines, no progress bar.
train::TrainOptions quiet(const std::string& out);
// The "train" lines of a run directory's metrics.jsonl.
std::vector<nlohmann::json> train_lines(const std::string& run);

// An image folder under `root` (train/ and test/, two classes of 8x8 PNGs told apart by
// colour, with noise): 48 training and 16 test images per class.
void write_image_folder(const std::filesystem::path& root);

// A narrow ResNet-18 (CIFAR stem, base width 4) and a 2-layer ViT (dim 32, patch 2) on the
// image folder at `dir`, batch 16, `steps` optimizer steps (0: 4 epochs).
nlohmann::json tiny_resnet_config(const std::string& dir, int64_t steps);
nlohmann::json tiny_vit_config(const std::string& dir, int64_t steps);

// The tiny BERT of the golden model fixtures (tools/golden/gen_models.py, gen_lora.py):
// vocabulary 50, hidden 16, 2 layers of 2 heads, FFN 32, 16 positions, dropout off.
models::BertConfig golden_bert_config(int64_t num_labels);

}  // namespace lb::testing
