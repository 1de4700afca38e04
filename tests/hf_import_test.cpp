// Hugging Face directory import: names, legacy prefixes, reports, and clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lb/io/safetensors.h"
#include "models/hf_import.h"
#include "testing/testing.h"

namespace lb::models {
namespace {

namespace fs = std::filesystem;

TEST(HfImport, DropoutOverridesReplaceTheConfigs) {
  const std::string dir = testing::fixture_path("hf_bert_encoder");
  EXPECT_GT(load_hf_bert(dir, 2)->config().hidden_dropout_prob, 0.0);
  auto model = load_hf_bert(dir, 2, nullptr, {{"hidden_dropout_prob", 0.0}, {"attention_probs_dropout_prob", 0.0}});
  EXPECT_EQ(model->config().hidden_dropout_prob, 0.0);
  EXPECT_EQ(model->config().attention_probs_dropout_prob, 0.0);
}

TEST(HfImport, BertEncoderGetsFreshClassifierAndReportsIt) {
  const std::string dir = testing::fixture_path("hf_bert_encoder");
  HfLoadReport report;
  auto model = load_hf_bert(dir, /*num_labels=*/3, &report);
  EXPECT_EQ(report.initialized, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_TRUE(report.unexpected.empty()) << report.summary();
  const auto ckpt = read_hf_weights(dir);
  for (const auto& [name, t] : model->state_dict()) {
    if (name.rfind("classifier", 0) == 0) continue;
    ASSERT_EQ(name.rfind("bert.", 0), 0u) << name;
    const Tensor& want = ckpt.at(name.substr(5));
    EXPECT_EQ(t.to_double_vector(), want.to_double_vector()) << name;
  }
  EXPECT_EQ(model->config().num_labels, 3);
  EXPECT_NE(report.summary().find("classifier.weight"), std::string::npos);
}

TEST(HfImport, VitClassifierLoadsCompletely) {
  HfLoadReport report;
  auto model = load_hf_vit(testing::fixture_path("hf_vit_cls"), 0, &report);
  EXPECT_TRUE(report.initialized.empty()) << report.summary();
  EXPECT_TRUE(report.unexpected.empty()) << report.summary();
  EXPECT_EQ(model->config().num_labels, 3);
}

TEST(HfImport, LegacyGammaBetaNamesAndBadDirectories) {
  const fs::path tmp = fs::temp_directory_path() / ("lb_hf_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  fs::copy_file(testing::fixture_path("hf_bert_encoder/config.json"), tmp / "config.json");
  // Rename LayerNorm weights to the legacy gamma/beta spelling.
  std::vector<std::pair<std::string, Tensor>> renamed;
  for (auto& [n, t] : read_hf_weights(testing::fixture_path("hf_bert_encoder"))) {
    std::string k = n;
    if (k.ends_with("LayerNorm.weight")) k.replace(k.size() - 6, 6, "gamma");
    if (k.ends_with("LayerNorm.bias")) k.replace(k.size() - 4, 4, "beta");
    renamed.emplace_back(k, t);
  }
  io::save_safetensors((tmp / "model.safetensors").string(), renamed);
  HfLoadReport report;
  load_hf_bert(tmp.string(), 2, &report);
  EXPECT_EQ(report.initialized.size(), 2u) << report.summary();
  // Wrong shape: config says a different hidden size.
  {
    std::ofstream(tmp / "config.json") << R"({"hidden_size": 32, "num_attention_heads": 2,
      "num_hidden_layers": 2, "intermediate_size": 32, "vocab_size": 50,
      "max_position_embeddings": 16})";
    EXPECT_THROW(load_hf_bert(tmp.string(), 2), Error);
  }
  // Only a .bin: the error points at the converter.
  fs::remove(tmp / "model.safetensors");
  std::ofstream(tmp / "pytorch_model.bin") << "x";
  try {
    load_hf_bert(tmp.string(), 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("convert_bin_to_safetensors"), std::string::npos) << e.what();
  }
  // Bad config values name the JSON path.
  std::ofstream(tmp / "config.json") << R"({"hidden_size": "big"})";
  try {
    load_hf_bert(tmp.string(), 2);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json.hidden_size"), std::string::npos) << e.what();
  }
  // Hostile sizes: a u64-max vocab_size is named as given (it was "got -1"); sizes whose
  // embedding table would wrap the byte count are an error, not a null-pointer write.
  const auto load_error = [&](const std::string& config) {
    std::ofstream(tmp / "config.json") << config;
    try {
      load_hf_bert(tmp.string(), 2);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = load_error(R"({"vocab_size": 18446744073709551615})");
  EXPECT_NE(m.find("config.json.vocab_size: 18446744073709551615 is out of range"), std::string::npos) << m;
  m = load_error(R"({"vocab_size": 2147483648, "hidden_size": 2147483648, "num_attention_heads": 1})");
  EXPECT_NE(m.find("more than 2^63 bytes"), std::string::npos) << m;
  fs::remove_all(tmp);
  EXPECT_THROW(load_hf_bert(tmp.string(), 2), Error);
}

}  // namespace
}  // namespace lb::models
