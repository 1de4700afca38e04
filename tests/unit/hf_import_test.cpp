// Hugging Face directory import: names, legacy prefixes, reports, and clear errors.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "lb/io/safetensors.h"
#include "models/hf_import.h"
#include "models/resnet.h"
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
  EXPECT_NE(m.find("config.json: vocab_size 2147483648, hidden_size 2147483648,"), std::string::npos) << m;
  EXPECT_NE(m.find("make more than 2^62 parameters"), std::string::npos) << m;
  fs::remove_all(tmp);
  EXPECT_THROW(load_hf_bert(tmp.string(), 2), Error);
}

// A Hugging Face directory in a fresh temporary folder: the fixture's config.json with
// `changes` applied (null erases a key), and its weights renamed by `rename` ("" drops one).
class HfDir {
 public:
  explicit HfDir(const std::string& fixture = "hf_bert_encoder") : fixture_(testing::fixture_path(fixture)) {
    fs::copy_file(fixture_ + "/config.json", tmp_.path() / "config.json");
    fs::copy_file(fixture_ + "/model.safetensors", tmp_.path() / "model.safetensors");
  }
  std::string dir() const { return tmp_.path().string(); }
  void config(const nlohmann::json& changes) const {
    nlohmann::json j = nlohmann::json::parse(std::ifstream(fixture_ + "/config.json"));
    for (auto& [k, v] : changes.items()) {
      if (v.is_null()) j.erase(k);
      else j[k] = v;
    }
    std::ofstream(tmp_.path() / "config.json") << j.dump(2);
  }
  void config_text(const std::string& text) const { std::ofstream(tmp_.path() / "config.json") << text; }
  void weights(const std::function<std::string(const std::string&)>& rename) const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (auto& [n, t] : read_hf_weights(fixture_))
      if (const std::string k = rename(n); !k.empty()) out.emplace_back(k, t);
    io::save_safetensors((tmp_.path() / "model.safetensors").string(), out);
  }

 private:
  std::string fixture_;
  testing::TempDir tmp_{"lb_hf"};
};

std::string bert_error(const HfDir& d, const nlohmann::json& overrides = {}) {
  return testing::error_message([&] { load_hf_bert(d.dir(), 2, nullptr, overrides); });
}

// A config.json that is an array went through nlohmann's update() with the dropout overrides
// and escaped as its raw type_error; an unknown hidden_act quoted our source file's error.
TEST(HfImport, HostileConfigErrorsNameTheFileAndKey) {
  HfDir d;
  const std::string config = d.dir() + "/config.json";
  d.config_text("[1, 2]");
  for (const auto& overrides : {nlohmann::json(), nlohmann::json{{"hidden_dropout_prob", 0.0}}}) {
    const std::string m = bert_error(d, overrides);
    EXPECT_NE(m.find(config + ": expected a JSON object (a Hugging Face model config), got array"), std::string::npos) << m;
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  }
  d.config({{"hidden_act", "swish"}});
  std::string m = bert_error(d);
  EXPECT_NE(m.find(config + ".hidden_act: 'swish' is not implemented; valid: relu, gelu"), std::string::npos) << m;
  EXPECT_EQ(m.find("layers.cpp"), std::string::npos) << m;
  // Sizes whose parameters cannot fit in memory are refused before anything is allocated:
  // 2^40 layers allocated until killed; hidden_size 2^31 wrapped byte counts.
  d.config({{"num_hidden_layers", int64_t{1} << 40}});
  m = bert_error(d);
  EXPECT_NE(m.find(config + ": vocab_size 50, hidden_size 16, num_hidden_layers 1099511627776,"), std::string::npos) << m;
  EXPECT_NE(m.find("GiB in float32, more than this machine's"), std::string::npos) << m;
  d.config({{"hidden_size", int64_t{1} << 31}, {"num_attention_heads", 1}});
  m = bert_error(d);
  EXPECT_NE(m.find(config + ": vocab_size 50, hidden_size 2147483648,"), std::string::npos) << m;
  d.config({{"num_hidden_layers", INT64_MAX}, {"intermediate_size", INT64_MAX}});
  m = bert_error(d);
  EXPECT_NE(m.find("make more than 2^62 parameters"), std::string::npos) << m;
  // The same guard holds for ViT (image_size 2^40 wrapped num_patches()) and ResNet.
  HfDir v("hf_vit_cls");
  v.config({{"image_size", int64_t{1} << 40}, {"patch_size", 1}});
  m = testing::error_message([&] { load_hf_vit(v.dir(), 0); });
  EXPECT_NE(m.find(v.dir() + "/config.json: image_size 1099511627776, patch_size 1,"), std::string::npos) << m;
  m = testing::error_message([] { ResNetConfig::from_json({{"base_width", int64_t{1} << 40}}, "model"); });
  EXPECT_NE(m.find("model: depth 18, base_width 1099511627776, num_classes 1000 make"), std::string::npos) << m;
  EXPECT_NO_THROW(ResNetConfig::from_json({{"depth", 50}}, "model"));
  // A shard index whose file names are not strings.
  fs::remove(d.dir() + "/model.safetensors");
  d.config({});
  std::ofstream(d.dir() + "/model.safetensors.index.json") << R"({"weight_map": {"a": 3}})";
  m = bert_error(d);
  EXPECT_NE(m.find("model.safetensors.index.json: weight_map.a: expected a file name, got 3"), std::string::npos) << m;
}

// position_embedding_type "relative_key" was ignored: the model trained with absolute
// positions under a relative-position checkpoint's name. Settings that change the maths are
// refused, naming the file and key; harmless ones (chunking, caching) still load.
TEST(HfImport, SettingsThatChangeTheMathsAreRefused) {
  HfDir d;
  const std::string config = d.dir() + "/config.json";
  d.config({{"position_embedding_type", "relative_key"}});
  std::string m = bert_error(d);
  EXPECT_NE(m.find(config + ".position_embedding_type: 'relative_key' is not implemented"), std::string::npos) << m;
  d.config({{"position_embedding_type", "relative_key_query"}});
  EXPECT_NE(bert_error(d).find("'relative_key_query' is not implemented"), std::string::npos);
  d.config({{"is_decoder", true}});
  m = bert_error(d);
  EXPECT_NE(m.find(config + ".is_decoder: true is not implemented (a causal attention mask)"), std::string::npos) << m;
  d.config({{"add_cross_attention", true}});
  EXPECT_NE(bert_error(d).find(config + ".add_cross_attention: true is not implemented"), std::string::npos);
  d.config({{"model_type", "roberta"}});
  EXPECT_NE(bert_error(d).find(config + ".model_type: 'roberta' is not implemented"), std::string::npos);
  d.config({{"problem_type", "multi_label_classification"}});
  EXPECT_NE(bert_error(d).find(config + ".problem_type: \"multi_label_classification\" is not implemented"),
            std::string::npos);
  d.config({{"is_decoder", "no"}});
  EXPECT_NE(bert_error(d).find(config + ".is_decoder: expected true or false, got \"no\""), std::string::npos);
  HfDir v("hf_vit_cls");
  v.config({{"model_type", "deit"}});
  m = testing::error_message([&] { load_hf_vit(v.dir(), 0); });
  EXPECT_NE(m.find(v.dir() + "/config.json.model_type: 'deit' is not implemented"), std::string::npos) << m;
  // Harmless or default settings load.
  d.config({{"position_embedding_type", "absolute"}, {"is_decoder", false}, {"chunk_size_feed_forward", 4},
            {"use_cache", false}, {"problem_type", "single_label_classification"}, {"add_cross_attention", false}});
  EXPECT_NO_THROW(load_hf_bert(d.dir(), 2));
  d.config({{"position_embedding_type", nullptr}, {"model_type", nullptr}});
  EXPECT_NO_THROW(load_hf_bert(d.dir(), 2));
  // classifier_dropout is the head's dropout when set (it was ignored), as in HF.
  d.config({{"classifier_dropout", 0.3}});
  auto model = load_hf_bert(d.dir(), 2);
  EXPECT_EQ(model->config().classifier_dropout, 0.3);
  EXPECT_EQ(model->config().to_json().at("classifier_dropout"), 0.3);
  EXPECT_EQ(BertConfig::from_json(model->config().to_json(), "x").classifier_dropout, 0.3);
  EXPECT_FALSE(load_hf_bert(testing::fixture_path("hf_bert_encoder"), 2)->config().classifier_dropout.has_value());
}

// Every tensor renamed trained from random initialisation with only an info line. Now: no
// encoder tensor matched is an error naming the file; more than the head fresh is a WARNING.
TEST(HfImport, RenamedTensorsAreRefusedOrWarnedAbout) {
  HfDir d;
  HfLoadReport report;
  load_hf_bert(d.dir(), 2, &report);
  EXPECT_EQ(report.warning(), "") << report.warning();  // only the classifier is fresh
  d.weights([](const std::string& n) { return "model." + n; });
  std::string m = bert_error(d);
  EXPECT_NE(m.find(d.dir() + "/model.safetensors: none of its"), std::string::npos) << m;
  EXPECT_NE(m.find("matches a weight of the model's encoder"), std::string::npos) << m;
  // A file holding only a classifier does not count as a pretrained encoder.
  io::save_safetensors(d.dir() + "/model.safetensors",
                       {{"classifier.weight", Tensor::zeros({2, 16})}, {"classifier.bias", Tensor::zeros({2})}});
  m = bert_error(d);
  EXPECT_NE(m.find("none of its 2 tensors (classifier.bias, classifier.weight) matches"), std::string::npos) << m;
  // Layer 1 renamed: loads, with a warning naming how many and the first few.
  d.weights([](const std::string& n) {
    return n.rfind("encoder.layer.1.", 0) == 0 ? "encoder.layers.1." + n.substr(16) : n;
  });
  load_hf_bert(d.dir(), 2, &report);
  const std::string w = report.warning();
  EXPECT_EQ(w.rfind("WARNING: 16 weight(s) of the model beyond the classifier head are not in " + d.dir() +
                        "/model.safetensors and start from random initialisation: bert.encoder.layer.1.",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find(", ... (16 in all)"), std::string::npos) << w;
  EXPECT_NE(w.find("16 checkpoint tensor(s) went unused: encoder.layers.1."), std::string::npos) << w;
}

// One NaN or inf in a pretrained directory's weights is refused, naming the file, the tensor
// and the element (it evaluated to "eval_loss": null and predicted all-"0" before), in f32
// and in the half-precision dtypes checked by their exponent bits.
TEST(HfImport, NonFiniteWeightsAreRefused) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (double bad : {std::nan(""), HUGE_VAL}) {
      HfDir d;
      std::vector<std::pair<std::string, Tensor>> out;
      for (auto& [n, t] : read_hf_weights(testing::fixture_path("hf_bert_encoder"))) {
        Tensor c = t.to(DType::F64);
        if (n == "encoder.layer.0.attention.self.query.weight") c.data<double>()[5] = bad;
        out.emplace_back(n, c.to(dt));
      }
      io::save_safetensors(d.dir() + "/model.safetensors", out);
      const std::string m = bert_error(d);
      EXPECT_NE(m.find(d.dir() + "/model.safetensors: tensor 'encoder.layer.0.attention.self.query.weight' holds "
                                 "NaN or inf (element 5)"),
                std::string::npos)
          << dtype_name(dt) << ": " << m;
    }
}

}  // namespace
}  // namespace lb::models
