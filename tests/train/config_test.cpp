// Run configs (lb/train/config.h): defaults, the resolved form, --set overrides with type
// checking, and every error path naming the file and JSON path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/dist/process_group.h"
#include "lb/train/config.h"
#include "src/train/training_setup.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

std::string error_of(const std::function<void()>& f) { return lb::testing::error_message(f); }

Config parse(const nlohmann::json& j) { return Config::from_json(j, "test.json"); }

std::string parse_error(const nlohmann::json& j) {
  return error_of([&] { parse(j); });
}

// A user's own text data: its keys read, written back, and refused where they cannot apply.
TEST(Config, OwnTextDataKeys) {
  const nlohmann::json model = {{"type", "bert"}, {"hidden_size", 64}, {"num_attention_heads", 4}};
  auto data = [&](nlohmann::json d) { return nlohmann::json{{"model", model}, {"data", d}}; };
  const Config c = parse(data({{"task", "text_classification"}, {"dir", "d"}, {"format", "jsonl"},
                               {"text_columns", "review"}, {"labels", {"bad", "good"}}}));
  EXPECT_EQ(c.data.text_columns, (std::vector<std::string>{"review"}));
  EXPECT_EQ(c.data.label_column, "label");
  EXPECT_EQ(parse(c.to_json()).to_json(), c.to_json());
  EXPECT_EQ(c.to_json()["data"]["labels"], (nlohmann::json{"bad", "good"}));
  // GLUE's config.json has none of them.
  EXPECT_FALSE(parse(data({{"task", "sst2"}, {"dir", "d"}})).to_json()["data"].contains("text_columns"));
  auto err = [&](nlohmann::json d) { return parse_error(data(d)); };
  EXPECT_NE(err({{"task", "sst2"}, {"dir", "d"}, {"label_column", "y"}})
                .find("data.label_column: only for data.task text_classification or text_regression"),
            std::string::npos);
  EXPECT_NE(err({{"task", "text_classification"}, {"dir", "d"}, {"text_columns", {"a", "b", "c"}}})
                .find("data.text_columns: one column (a text) or two (a sentence pair), got 3"),
            std::string::npos);
  EXPECT_NE(err({{"task", "text_classification"}, {"dir", "d"}, {"labels", {"x", "y", "x"}}})
                .find("data.labels[2]: 'x' is also labels[0]"),
            std::string::npos);
  EXPECT_NE(err({{"task", "text_regression"}, {"dir", "d"}, {"labels", {"x", "y"}}})
                .find("data.labels: a regression task has no class names"),
            std::string::npos);
  EXPECT_NE(err({{"task", "text_classification"}, {"dir", "d"}, {"format", "xlsx"}}).find("data.format"),
            std::string::npos);
  EXPECT_NE(err({{"task", "text_classification"}}).find("data.dir: required"), std::string::npos);
}

TEST(Config, DefaultsAndResolvedRoundTrip) {
  const Config c = parse({{"model", {{"type", "bert"}, {"hidden_size", 64}, {"num_attention_heads", 4}}}});
  EXPECT_EQ(c.data.task, "synthetic");
  EXPECT_EQ(c.data.batch_size, 32);
  EXPECT_EQ(c.optimizer.type, "adamw");
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 5e-5);
  EXPECT_EQ(c.schedule.type, "linear");
  EXPECT_EQ(c.train.grad_accum, 1);
  const nlohmann::json r = c.to_json();
  EXPECT_EQ(r["model"]["hidden_size"], 64);
  EXPECT_EQ(r["model"]["num_hidden_layers"], 12);  // defaults filled in
  EXPECT_EQ(r["train"]["seed"], 42);
  // The resolved config parses back to itself.
  EXPECT_EQ(parse(r).to_json(), r);
}

TEST(Config, MemoryCodecRulesParseWithDefaultsAndRoundTrip) {
  const Config none = parse(nlohmann::json::object());
  EXPECT_TRUE(none.memory.codecs.empty());
  EXPECT_FALSE(none.to_json().contains("memory"));  // a run without codecs writes what it did before
  const Config c = parse({{"memory",
                           {{"codecs",
                             {{{"match", "bert.encoder.*"}, {"op", "gelu"}, {"codec", "int4"}},
                              {{"codec", "int8"}, {"group", "row"}},
                              {{"codec", "bf16"}}}}}}});
  ASSERT_EQ(c.memory.codecs.size(), 3u);
  EXPECT_EQ(c.memory.codecs[0].op, "gelu");
  EXPECT_EQ(c.memory.codecs[0].role, "*");
  EXPECT_EQ(c.memory.codecs[0].spec.group, 128);
  EXPECT_TRUE(c.memory.codecs[0].spec.stochastic);   // int4, int2: stochastic by default
  EXPECT_FALSE(c.memory.codecs[1].spec.stochastic);  // int8: round to nearest
  EXPECT_EQ(c.memory.codecs[1].spec.group, 0);       // per row
  EXPECT_EQ(c.memory.codecs[2].spec.codec, autograd::Codec::BF16);
  const nlohmann::json r = c.to_json();
  EXPECT_EQ(r["memory"]["codecs"][1]["group"], "row");
  EXPECT_EQ(parse(r).to_json(), r);
  // --set reaches it as any other key.
  nlohmann::json j = nlohmann::json::object();
  apply_override(j, "memory.codecs=[{\"codec\":\"int2\",\"rounding\":\"nearest\"}]");
  EXPECT_FALSE(parse(j).memory.codecs.at(0).spec.stochastic);
  // A budget with micro-batches forbidden reads back so.
  const Config b = parse({{"memory", {{"activation_budget", "0.1x"}, {"micro_batches", false}}}});
  EXPECT_FALSE(b.memory.micro_batches);
  EXPECT_EQ(b.to_json()["memory"]["micro_batches"], false);
  EXPECT_EQ(parse(b.to_json()).to_json(), b.to_json());
  EXPECT_TRUE(parse({{"memory", {{"activation_budget", "0.1x"}}}}).memory.micro_batches);
}

TEST(Config, SgdDefaultsAndKeys) {
  const Config c = parse({{"optimizer", {{"type", "sgd"}, {"momentum", 0.9}, {"nesterov", true}}}});
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.1);
  EXPECT_TRUE(c.optimizer.nesterov);
  EXPECT_NE(parse_error({{"optimizer", {{"type", "sgd"}, {"beta1", 0.9}}}}).find("only for adam"),
            std::string::npos);
  EXPECT_NE(parse_error({{"optimizer", {{"type", "adamw"}, {"momentum", 0.9}}}}).find("only for type sgd"),
            std::string::npos);
}

TEST(Config, ErrorsNameFileAndPath) {
  struct Case {
    nlohmann::json j;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"modle", nlohmann::json::object()}}, "test.json: config: unknown key 'modle'"},
      {{{"model", 3}}, "model: expected a JSON object"},
      {{{"model", {{"type", "gpt"}}}}, "model.type: 'gpt' is not valid; choose one of: bert, vit, resnet"},
      {{{"model", {{"hidden_sise", 8}}}}, "model: unknown key 'hidden_sise' for a bert model"},
      {{{"model", {{"hidden_size", "big"}}}}, "hidden_size"},
      {{{"model", {{"type", "resnet"}, {"depth", 19}}}}, "model.depth: must be 18, 34 or 50"},
      {{{"model", {{"pretrained", "/x"}, {"hidden_size", 8}}}}, "cannot be combined with model.pretrained"},
      {{{"model", {{"pretrained", "/x"}, {"hidden_dropout_prob", 1.5}}}}, "hidden_dropout_prob"},
      {{{"model", {{"skip_padding", "yes"}}}}, "model.skip_padding: expected true, false or \"auto\", got \"yes\""},
      {{{"model", {{"type", "resnet"}, {"skip_padding", true}}}}, "model.skip_padding: applies to bert models"},
      {{{"data", {{"batch_size", 0}}}}, "data.batch_size: 0 is out of range"},
      {{{"data", {{"batch_size", 3.5}}}}, "data.batch_size: expected an integer, got 3.5"},
      {{{"data", {{"padding", "left"}}}}, "data.padding: 'left' is not valid"},
      {{{"data", {{"task", "mrpc"}}}}, "data.dir: required for task 'mrpc'"},
      {{{"data", {{"mean", {0.5, 0.5}}}}}, "data.mean: expected a list of 3 numbers"},
      {{{"train", {{"epochs", 0}, {"max_steps", 0}}}}, "train: set epochs > 0 or max_steps > 0"},
      {{{"train", {{"grad_accum", -1}}}}, "train.grad_accum: -1 is out of range"},
      {{{"memory", {{"activation_budget", "0.1x"}, {"micro_batches", "auto"}}}}, "memory.micro_batches: expected true or false"},
      {{{"train", {{"seed", -3}}}}, "train.seed: -3 is out of range"},
      {{{"train", {{"precision", "f16"}}}}, "train.precision: 'f16' is not valid"},
      {{{"train", {{"bucket_cap_mb", 0}}}}, "train.bucket_cap_mb: must be > 0 MiB, got 0"},
      {{{"train", {{"bucket_cap_mb", "big"}}}}, "train.bucket_cap_mb: expected a number"},
      {{{"optimizer", {{"lr", 0}}}}, "optimizer.lr: must be > 0"},
      {{{"optimizer", {{"lr", "fast"}}}}, "optimizer.lr: expected a number"},
      {{{"schedule", {{"type", "step"}}}}, "schedule.type: 'step' is not valid"},
      {{{"schedule", {{"warmup_ratio", 0.1}, {"warmup_steps", 10}}}}, "warmup_ratio or warmup_steps, not both"},
      {{{"backward", {{"default", {{"type", "fast"}}}}}}, "backward.default"},
      {{{"backward", {{"rules", {{{"match", "*"}, {"type", "instant"}, {"epsilon", 2}}}}}}}, "backward.rules[0]"},
      {{{"freeze", "bert.*"}}, "freeze: expected a list"},
      {{{"freeze", {1}}}, "freeze[0]: expected a string"},
      {{{"output", {{"path", "x"}}}}, "output: unknown key 'path'"},
      {{{"memory", {{"codecs", {{"codec", "int8"}}}}}}, "memory.codecs: expected a list of rules"},
      {{{"memory", {{"codecs", {{{"match", "*"}}}}}}}, "memory.codecs[0].codec: missing"},
      {{{"memory", {{"codecs", {{{"codec", "int3"}}}}}}}, "memory.codecs[0].codec: 'int3' is not valid"},
      {{{"memory", {{"codecs", {{{"codec", "int8"}, {"group", 0}}}}}}}, "memory.codecs[0].group: 0 is out of range"},
      {{{"memory", {{"codecs", {{{"codec", "int8"}, {"group", "col"}}}}}}}, "memory.codecs[0].group: \"row\" or"},
      {{{"memory", {{"codecs", {{{"codec", "bf16"}, {"rounding", "stochastic"}}}}}}},
       "memory.codecs[0].rounding: bf16 rounds to nearest only"},
      {{{"memory", {{"codecs", {{{"codec", "int4"}, {"bits", 4}}}}}}}, "memory.codecs[0]: unknown key 'bits'"},
      {{{"memory", {{"recompute", "bert.*"}}}}, "memory.recompute: expected a list of strings"},
      {{{"memory", {{"recomputes", {"*"}}}}}, "memory: unknown key 'recomputes'"},
  };
  for (const auto& c : cases) {
    const std::string e = parse_error(c.j);
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.j.dump() << "\n  got: " << e;
    EXPECT_EQ(e.rfind("test.json: ", 0), 0u) << e;
  }
}

TEST(Config, OverridesAreTypeChecked) {
  nlohmann::json j = {{"optimizer", {{"lr", 1e-3}}}};
  apply_override(j, "optimizer.lr=3e-5");
  apply_override(j, "data.task=synthetic");      // bare word: a string
  apply_override(j, "train.max_steps=7");
  apply_override(j, "freeze=[\"bert.embeddings.*\"]");
  apply_override(j, "data.padding=\"max_length\"");
  const Config c = parse(j);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-5);
  EXPECT_EQ(c.train.max_steps, 7);
  EXPECT_EQ(c.freeze.at(0), "bert.embeddings.*");
  EXPECT_EQ(c.data.padding, "max_length");

  nlohmann::json k = nlohmann::json::object();
  apply_override(k, "train.grad_accum=two");
  EXPECT_NE(parse_error(k).find("train.grad_accum: expected an integer, got \"two\""), std::string::npos);
  nlohmann::json u = nlohmann::json::object();
  apply_override(u, "optimizer.learning_rate=1");
  EXPECT_NE(parse_error(u).find("optimizer: unknown key 'learning_rate'"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_override(u, "no_equals"); }).find("expected KEY=VALUE"), std::string::npos);
  EXPECT_NE(error_of([&] { apply_override(u, "optimizer..lr=1"); }).find("empty key component"),
            std::string::npos);
  nlohmann::json v = {{"freeze", nlohmann::json::array()}};
  EXPECT_NE(error_of([&] { apply_override(v, "freeze.x=1"); }).find("freeze is not an object"),
            std::string::npos);
}

TEST(Config, FileErrorsNameLineAndColumn) {
  namespace fs = std::filesystem;
  const lb::testing::TempDir tmp("lb_config");
  const fs::path& dir = tmp.path();
  const fs::path bad = dir / "bad.json";
  std::ofstream(bad) << "{\n  \"model\": {\"type\": \"bert\",}\n}\n";
  const std::string e = error_of([&] { load_config(bad.string()); });
  EXPECT_NE(e.find(bad.string() + ":2:"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { load_config((dir / "missing.json").string()); }).find("no such config file"),
            std::string::npos);
  const fs::path arr = dir / "arr.json";
  std::ofstream(arr) << "[1, 2]";
  EXPECT_NE(error_of([&] { load_config(arr.string()); }).find("a config is a JSON object"), std::string::npos);
  const fs::path ok = dir / "ok.json";
  std::ofstream(ok) << R"({"train": {"max_steps": 3}})";
  const Config c = load_config(ok.string(), {"train.max_steps=5", "optimizer.lr=0.01"});
  EXPECT_EQ(c.train.max_steps, 5);
  EXPECT_EQ(c.source, ok.string());
  const std::string o = error_of([&] { load_config(ok.string(), {"train.max_steps=-5"}); });
  EXPECT_NE(o.find(ok.string() + ": train.max_steps: -5 is out of range"), std::string::npos) << o;
}

TEST(Config, PathsExpandHomeAndLeanbackHome) {
  ::setenv("LEANBACK_HOME", "/opt/lbhome", 1);
  const Config c = parse({{"model", {{"pretrained", "${LEANBACK_HOME}/models/m"}}}});
  EXPECT_EQ(c.model.pretrained, "/opt/lbhome/models/m");
  ::unsetenv("LEANBACK_HOME");
  const Config d = parse({{"model", {{"pretrained", "${LEANBACK_HOME}/models/m"}}}});
  EXPECT_EQ(d.model.pretrained, std::string(std::getenv("HOME")) + "/.cache/leanback/models/m");
  EXPECT_NE(parse_error({{"data", {{"dir", "${LB_SURELY_UNSET_VAR}/x"}}}}).find("LB_SURELY_UNSET_VAR"),
            std::string::npos);
}

// eval / predict compare the model they build with the checkpoint's recorded config: settings
// that change the maths are named with both values; path, init, dropout and padding are not.
TEST(Config, MathsDifferencesNameTheKeyAndBothValues) {
  nlohmann::json j = lb::testing::tiny_bert_config(1);
  j["lora"] = {{"r", 2}, {"alpha", 4}};
  const Config c = Config::from_json(j, "t.json");
  nlohmann::json saved = c.to_json();
  EXPECT_TRUE(maths_differences(c, saved).empty());
  saved["model"]["hidden_dropout_prob"] = 0.5;
  saved["model"]["initializer_range"] = 1.0;
  saved["model"]["pretrained"] = "/elsewhere";
  saved["lora"]["dropout"] = 0.3;
  EXPECT_TRUE(maths_differences(c, saved).empty());
  saved["model"]["hidden_act"] = "relu";
  saved["lora"]["alpha"] = 160;
  const std::vector<std::string> d = maths_differences(c, saved);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "lora.alpha: 4.0 here, 160 in the checkpoint");
  EXPECT_EQ(d[1], "model.hidden_act: \"gelu\" here, \"relu\" in the checkpoint");
  saved.erase("lora");
  EXPECT_NE(maths_differences(c, saved).front().find("here, unset in the checkpoint"), std::string::npos);
}

// A run's config is resolved once, before set-up ("auto" padding settings, the memory plan's
// settings), and set-up builds from that resolved config only: no part of a run can see a
// config another part resolved differently.
TEST(TrainingSetup, BuildsOnlyFromAResolvedConfig) {
  nlohmann::json j = lb::testing::tiny_bert_config(1, /*dropout=*/0.0);
  j["data"]["padding"] = "auto";
  j["model"]["skip_padding"] = "auto";
  const Config requested = Config::from_json(j, "tiny.json");
  dist::ProcessGroup& pg = dist::single_process();
  try {
    set_up_training(requested, "", Device::cpu(), pg);
    FAIL() << "an unresolved config was set up";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tiny.json: set_up_training needs a resolved config"), std::string::npos)
        << e.what();
  }
  const Config resolved = resolved_for_training(requested);
  EXPECT_EQ(resolved.data.padding, "dynamic");
  EXPECT_EQ(resolved.model.skip_padding, "true");
  EXPECT_EQ(requested.data.padding, "auto");  // the requested config stays as given
  const TrainingSetup s = set_up_training(resolved, "", Device::cpu(), pg);
  EXPECT_GT(s.total_steps, 0);
  // Told not to, BERT keeps its padding; an explicit padding is kept as given.
  j["model"]["skip_padding"] = false;
  j["data"]["padding"] = "max_length";
  const Config fixed = resolved_for_training(Config::from_json(j, "tiny.json"));
  EXPECT_EQ(fixed.model.skip_padding, "false");
  EXPECT_EQ(fixed.data.padding, "max_length");
}

}  // namespace
}  // namespace lb::train
