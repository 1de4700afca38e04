// `leanback export` (lb/train/export/hf_export.h): trained tiny BERT / ViT / ResNet runs exported and
// read back — by our Hugging Face import (the files transformers reads) or, for ResNet, by a
// strict state_dict load — give the run's logits; LoRA runs export as PEFT adapters (onto the
// pretrained base) or merged; the output directory is never one the user owns. The check
// that transformers and peft open the files is tests/cli/export_hf.sh.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "lb/autograd/grad_mode.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/export/hf_export.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "lb/train/trainer.h"
#include "models/hf_import.h"
#include "models/resnet.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;
using lb::testing::quiet;
using lb::testing::TempDir;

// The first eval batch of the config's task, and the model's logits on it (eval mode).
Tensor logits_on_eval_batch(TaskModel& model, const Config& c) {
  TaskDataOptions o;
  o.train = false;
  const TaskData d = load_task_data(c, o);
  auto loader = make_loader(d, c, false, 1);
  loader->start_epoch(0);
  data::Batch b;
  EXPECT_TRUE(loader->next(b));
  model.module().eval();
  const NoGradGuard no_grad;
  return model.forward(b).logits.contiguous();
}

// The run's model, rebuilt from its config and latest checkpoint as `leanback eval` does.
std::unique_ptr<TaskModel> run_model(const Config& c, const std::string& run, int64_t labels, int64_t vocab) {
  auto m = build_task_model(c, labels, vocab);
  load_checkpoint(find_checkpoint(run), m->module(), nullptr);
  return m;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto x = a.to_double_vector(), y = b.to_double_vector();
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
    scale = std::max(scale, std::abs(static_cast<double>(y[i])));
  }
  return worst / scale;
}

nlohmann::json tiny_text(int64_t steps) {
  nlohmann::json j = lb::testing::tiny_bert_config(steps);
  j["data"]["synthetic_train"] = 64;
  j["data"]["synthetic_eval"] = 16;
  j["optimizer"]["lr"] = 1e-2;
  return j;
}

TEST(Export, BertRunExportsAModelOurImportReadsBack) {
  TempDir tmp("lb_export");
  nlohmann::json j = tiny_text(3);
  j["output"]["export"] = true;
  const Config c = Config::from_json(j, "tiny.json");
  const std::string run = tmp.sub("run");
  train(c, quiet(run));
  const fs::path ex = fs::path(run) / "export";
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
                        "special_tokens_map.json"})
    EXPECT_TRUE(fs::exists(ex / f)) << f;
  const nlohmann::json cfg = io::read_json_file((ex / "config.json").string());
  EXPECT_EQ(cfg["architectures"][0], "BertForSequenceClassification");
  EXPECT_EQ(cfg["id2label"], nlohmann::json({{"0", "negative"}, {"1", "positive"}}));
  EXPECT_EQ(cfg["label2id"]["positive"], 1);
  EXPECT_EQ(cfg["problem_type"], "single_label_classification");
  EXPECT_EQ(io::load_safetensors((ex / "model.safetensors").string()).metadata.at("format"), "pt");

  // Our Hugging Face import of the export gives the run's logits, bit for bit (same weights,
  // same arithmetic), and the exported tokenizer is the task's.
  const data::WordPieceTokenizer tok = task_tokenizer(c);
  const auto ours = run_model(c, run, 2, tok.vocab_size());
  auto imported = models::load_hf_bert(ex.string(), 0);
  EXPECT_EQ(imported->config().num_labels, 2);
  Config ci = c;
  ci.model.pretrained = ex.string();
  ci.model.arch = nlohmann::json::object();
  const auto back = build_task_model(ci, 2, tok.vocab_size());
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*back, c), logits_on_eval_batch(*ours, c)), 0.0);
  const auto tok2 = data::WordPieceTokenizer::from_dir(ex.string());
  EXPECT_EQ(tok2.vocab_size(), tok.vocab_size());
  const std::string text = "the movie was great and fun .";
  EXPECT_EQ(tok2.tokenize_ids(text), tok.tokenize_ids(text));
  const nlohmann::json tc = io::read_json_file((ex / "tokenizer_config.json").string());
  EXPECT_EQ(tc["model_max_length"], c.data.max_seq_len);
  EXPECT_EQ(tc["do_lower_case"], true);

  // --overwrite of the run replaces its export/ too, and keeps a file of the user's there.
  std::ofstream(ex / "notes.txt") << "mine";
  TrainOptions again = quiet(run);
  again.overwrite = true;
  train(c, again);
  EXPECT_TRUE(fs::exists(ex / "model.safetensors"));
  EXPECT_TRUE(fs::exists(ex / "notes.txt"));
  fs::remove(ex / "notes.txt");

  // `leanback export` of the run directory (its latest checkpoint) writes the same model.
  const ExportSummary s = export_checkpoint(run, tmp.path() / "cli", {});
  EXPECT_EQ(s.format, "transformers");
  EXPECT_EQ(s.checkpoint, find_checkpoint(run));
  const auto a = io::load_safetensors((ex / "model.safetensors").string());
  const auto b = io::load_safetensors((tmp.path() / "cli" / "model.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].first, b.tensors[i].first);
    EXPECT_EQ(a.tensors[i].second.to_double_vector(), b.tensors[i].second.to_double_vector()) << a.tensors[i].first;
  }

  // A checkpoint written before checkpoints carried the model and the task's labels: both are
  // rebuilt from its config (the labels from the task), and the export is the same.
  const std::string state_path = (fs::path(s.checkpoint) / "trainer_state.json").string();
  nlohmann::json state = io::read_json_file(state_path);
  ASSERT_TRUE(state["extra"].contains("task") && state["extra"].contains("model"));
  state["extra"].erase("task");
  state["extra"].erase("model");
  std::ofstream(state_path) << state.dump();
  export_checkpoint(s.checkpoint, tmp.path() / "old", {});
  EXPECT_EQ(io::read_json_file((tmp.path() / "old" / "config.json").string())["id2label"], cfg["id2label"]);
  const auto old = io::load_safetensors((tmp.path() / "old" / "model.safetensors").string());
  ASSERT_EQ(old.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < old.tensors.size(); ++i)
    EXPECT_EQ(old.tensors[i].second.to_double_vector(), b.tensors[i].second.to_double_vector()) << old.tensors[i].first;
}

TEST(Export, LoraRunExportsAPeftAdapterOrAMergedModel) {
  TempDir tmp("lb_export");
  // A "pretrained" base: a fully trained tiny run, exported.
  const Config full = Config::from_json(tiny_text(2), "tiny.json");
  train(full, quiet(tmp.sub("full")));
  const fs::path base = tmp.path() / "base";
  export_checkpoint(tmp.sub("full"), base, {});

  nlohmann::json j = tiny_text(4);
  j["model"] = {{"type", "bert"}, {"pretrained", base.string()}};
  j["lora"] = {{"r", 4}, {"alpha", 8}};
  const Config c = Config::from_json(j, "lora.json");
  const std::string run = tmp.sub("lora");
  train(c, quiet(run));
  const auto ours = run_model(c, run, 2, 0);
  const Tensor want = logits_on_eval_batch(*ours, c);

  // PEFT: the adapters, the head (modules_to_save) and nothing else of the frozen base.
  const fs::path peft = tmp.path() / "peft";
  const ExportSummary s = export_checkpoint(run, peft, {});
  EXPECT_EQ(s.format, "peft");
  EXPECT_FALSE(fs::exists(peft / "config.json"));  // transformers would take it for the model
  EXPECT_TRUE(fs::exists(peft / "vocab.txt"));
  const nlohmann::json ac = io::read_json_file((peft / "adapter_config.json").string());
  EXPECT_EQ(ac["peft_type"], "LORA");
  EXPECT_EQ(ac["task_type"], "SEQ_CLS");
  EXPECT_EQ(ac["r"], 4);
  EXPECT_EQ(ac["lora_alpha"], 8.0);
  EXPECT_EQ(ac["target_modules"], nlohmann::json({"query", "value"}));
  EXPECT_EQ(ac["modules_to_save"], nlohmann::json({"classifier"}));
  EXPECT_EQ(ac["base_model_name_or_path"], fs::absolute(base).lexically_normal().string());
  const auto adapter = io::load_safetensors((peft / "adapter_model.safetensors").string());
  std::map<std::string, Tensor> stripped;
  int lora_keys = 0;
  for (const auto& [k, t] : adapter.tensors) {
    ASSERT_EQ(k.rfind("base_model.model.", 0), 0u) << k;
    const std::string name = k.substr(17);
    lora_keys += name.find(".lora_") != std::string::npos;
    EXPECT_TRUE(name.find(".lora_") != std::string::npos || name.rfind("classifier.", 0) == 0) << name;
    stripped[name] = t;
  }
  EXPECT_EQ(lora_keys, 2 * 2 * 2);  // 2 layers × query, value × A, B
  // Read back onto the base (what PeftModel.from_pretrained does): the run's logits.
  Config fresh = c;
  auto back = build_task_model(fresh, 2, 0);
  const nn::LoadReport rep = back->module().load_state_dict(stripped, /*strict=*/false);
  EXPECT_TRUE(rep.unexpected.empty());
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*back, c), want), 0.0);

  // The adapter directory as model.pretrained (PeftModel.from_pretrained(base, DIR)): its base,
  // its LoRA settings, its weights: the run's logits, bit for bit; the config reads back as given.
  nlohmann::json a = tiny_text(4);
  a["model"] = {{"type", "bert"}, {"pretrained", peft.string()}};
  const Config ca = Config::from_json(a, "adapter.json");
  EXPECT_EQ(ca.model.adapter, peft.string());
  EXPECT_TRUE(fs::equivalent(ca.model.pretrained, base));
  ASSERT_TRUE(ca.lora.enabled);
  EXPECT_EQ(ca.lora.settings.r, 4);
  EXPECT_EQ(ca.lora.settings.alpha, 8.0);
  EXPECT_EQ(ca.lora.targets.modules, (std::vector<std::string>{"query", "value"}));
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*build_task_model(ca, 2, 0), c), want), 0.0);
  const nlohmann::json written = ca.to_json();
  EXPECT_EQ(written["model"]["pretrained"], peft.string());
  EXPECT_FALSE(written.contains("lora"));
  EXPECT_EQ(Config::from_json(written, "again.json").to_json(), written);
  // Bad adapters: errors that name the file and key, before any model is built.
  nlohmann::json both = a;
  both["lora"] = {{"r", 2}};
  std::string m = lb::testing::error_message([&] { Config::from_json(both, "adapter.json"); });
  EXPECT_NE(m.find("adapter.json: lora: model.pretrained (" + peft.string() + ") is a PEFT adapter"), std::string::npos) << m;
  const auto with_config = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
    const fs::path d = tmp.path() / name;
    fs::create_directories(d);
    nlohmann::json ac2 = ac;
    edit(ac2);
    std::ofstream(d / "adapter_config.json") << ac2.dump();
    fs::copy_file(peft / "adapter_model.safetensors", d / "adapter_model.safetensors");
    nlohmann::json j2 = a;
    j2["model"]["pretrained"] = d.string();
    return j2;
  };
  m = lb::testing::error_message([&] {
    Config::from_json(with_config("dora", [](nlohmann::json& x) { x["use_dora"] = true; }), "adapter.json");
  });
  EXPECT_NE(m.find("dora/adapter_config.json: use_dora is true: DoRA is not implemented"), std::string::npos) << m;
  m = lb::testing::error_message([&] {
    Config::from_json(with_config("hub", [](nlohmann::json& x) { x["base_model_name_or_path"] = "org/no-such-model"; }),
                      "adapter.json");
  });
  EXPECT_NE(m.find("hub/adapter_config.json: base_model_name_or_path 'org/no-such-model' is not a directory here"),
            std::string::npos) << m;
  m = lb::testing::error_message([&] {
    Config::from_json(with_config("ia3", [](nlohmann::json& x) { x["peft_type"] = "IA3"; }), "adapter.json");
  });
  EXPECT_NE(m.find("ia3/adapter_config.json: peft_type is \"IA3\""), std::string::npos) << m;
  // PEFT lists both head names for a classifier; the one this model lacks is skipped, as PEFT does.
  const Config both_heads = Config::from_json(
      with_config("seq_cls", [](nlohmann::json& x) { x["modules_to_save"] = {"classifier", "score"}; }), "adapter.json");
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*build_task_model(both_heads, 2, 0), c), want), 0.0);
  // Targets the saved adapters do not cover: the missing factor is named.
  const Config wider = Config::from_json(
      with_config("wider", [](nlohmann::json& x) { x["target_modules"] = {"query", "key", "value"}; }), "adapter.json");
  m = lb::testing::error_message([&] { build_task_model(wider, 2, 0); });
  EXPECT_NE(m.find("wider/adapter_model.safetensors: has no tensor for the adapter factor "
                   "'base_model.model.bert.encoder.layer.0.attention.self.key.lora_A.weight'"),
            std::string::npos) << m;
  // A NaN in an adapter factor: refused naming the file and tensor (plausible metrics before).
  const Config nan_b = Config::from_json(with_config("nan_b", [](nlohmann::json&) {}), "adapter.json");
  {
    const std::string f = (tmp.path() / "nan_b" / "adapter_model.safetensors").string();
    const auto saved = io::load_safetensors(f);
    std::vector<std::pair<std::string, Tensor>> out;
    std::string poisoned;
    for (const auto& [k, t] : saved.tensors) {
      Tensor c2 = t.clone();
      if (poisoned.empty() && k.find("lora_B") != std::string::npos && c2.dtype() == DType::F32) {
        c2.data<float>()[0] = std::nanf("");
        poisoned = k;
      }
      out.emplace_back(k, c2);
    }
    ASSERT_FALSE(poisoned.empty());
    io::save_safetensors(f, out, saved.metadata);
    m = lb::testing::error_message([&] { build_task_model(nan_b, 2, 0); });
    EXPECT_NE(m.find(f + ": tensor '" + poisoned + "' holds NaN or inf (element 0)"), std::string::npos) << m;
  }

  // Merged: a plain model, W + (alpha / r) B A, the run's logits to rounding.
  const fs::path merged = tmp.path() / "merged";
  ExportOptions mo;
  mo.merge = true;
  EXPECT_EQ(export_checkpoint(run, merged, mo).format, "transformers");
  for (const auto& [k, t] : io::load_safetensors((merged / "model.safetensors").string()).tensors)
    EXPECT_EQ(k.find("lora_"), std::string::npos) << k;
  Config cm = c;
  cm.lora = LoraSection{};
  cm.model.pretrained = merged.string();
  EXPECT_LT(max_rel_diff(logits_on_eval_batch(*build_task_model(cm, 2, 0), c), want), 1e-5);
}

// An adapter names its base portably: the Hugging Face name tools/fetch_pretrained.sh records
// (.hub_name), or the name asked for; leanback reads such an adapter back by finding that
// name's copy under $LEANBACK_HOME/models, or a path relative to the adapter.
TEST(Export, AdapterNamesItsBasePortably) {
  TempDir tmp("lb_export");
  train(Config::from_json(tiny_text(2), "tiny.json"), quiet(tmp.sub("full")));
  const fs::path home = tmp.path() / "home", base = home / "models" / "tiny-base";
  fs::create_directories(home / "models");
  export_checkpoint(tmp.sub("full"), base, {});
  std::ofstream(base / ".hub_name") << "org/tiny-bert\n";
  nlohmann::json j = tiny_text(2);
  j["model"] = {{"type", "bert"}, {"pretrained", base.string()}};
  j["lora"] = {{"r", 2}};
  train(Config::from_json(j, "lora.json"), quiet(tmp.sub("lora")));
  const fs::path peft = tmp.path() / "peft";
  const ExportSummary s = export_checkpoint(tmp.sub("lora"), peft, {});
  EXPECT_EQ(io::read_json_file((peft / "adapter_config.json").string())["base_model_name_or_path"], "org/tiny-bert");
  EXPECT_NE(s.usage.find("from_pretrained(\"org/tiny-bert\""), std::string::npos) << s.usage;
  // Read back: the name's copy under $LEANBACK_HOME/models (none elsewhere: a named error).
  nlohmann::json a = tiny_text(2);
  a["model"] = {{"type", "bert"}, {"pretrained", peft.string()}};
  const char* old = std::getenv("LEANBACK_HOME");
  const std::string saved = old ? old : "";
  ::setenv("LEANBACK_HOME", home.string().c_str(), 1);
  const Config back = Config::from_json(a, "adapter.json");
  ::setenv("LEANBACK_HOME", (tmp.path() / "elsewhere").string().c_str(), 1);
  const std::string missing = lb::testing::error_message([&] { Config::from_json(a, "adapter.json"); });
  if (old) ::setenv("LEANBACK_HOME", saved.c_str(), 1);
  else ::unsetenv("LEANBACK_HOME");
  EXPECT_TRUE(fs::equivalent(back.model.pretrained, base));
  EXPECT_NE(missing.find("base_model_name_or_path 'org/tiny-bert' is not a directory here, nor a model fetched into "
                         "$LEANBACK_HOME/models"), std::string::npos) << missing;
  // A name asked for, and a path relative to the adapter's directory.
  ExportOptions o;
  o.base_model = "../home/models/tiny-base";
  export_checkpoint(tmp.sub("lora"), tmp.path() / "peft2", o);
  a["model"]["pretrained"] = (tmp.path() / "peft2").string();
  EXPECT_TRUE(fs::equivalent(Config::from_json(a, "adapter.json").model.pretrained, base));
  // A broken .hub_name is named.
  std::ofstream(base / ".hub_name", std::ios::trunc) << "not a name at all\n";
  EXPECT_NE(lb::testing::error_message([&] { export_checkpoint(tmp.sub("lora"), tmp.path() / "peft3", {}); })
                .find(".hub_name: expected one Hugging Face model name (org/model), got 'not a name at all'"),
            std::string::npos);
}

TEST(Export, MergeNeedsAdaptersAndARandomBaseOnlyMerges) {
  TempDir tmp("lb_export");
  ExportOptions mo;
  mo.merge = true;
  train(Config::from_json(tiny_text(1), "tiny.json"), quiet(tmp.sub("full")));
  // A LoRA run on a random initialisation has no base to put an adapter on: --merge only.
  nlohmann::json r = tiny_text(1);
  r["lora"] = {{"r", 2}};
  const Config cr = Config::from_json(r, "rand.json");
  train(cr, quiet(tmp.sub("rand")));
  const std::string msg = lb::testing::error_message([&] { export_checkpoint(tmp.sub("rand"), tmp.path() / "x", {}); });
  EXPECT_NE(msg.find("export it with --merge"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(tmp.path() / "x"));  // refused before creating anything
  EXPECT_NE(lb::testing::error_message([&] { export_checkpoint(tmp.sub("full"), tmp.path() / "y", mo); })
                .find("no LoRA adapters to merge"),
            std::string::npos);
}

TEST(Export, ImageModels) {
  TempDir tmp("lb_export");
  const fs::path images = tmp.path() / "images";
  lb::testing::write_image_folder(images);

  // ResNet: torchvision's state_dict names, read back strictly.
  const Config rc = Config::from_json(lb::testing::tiny_resnet_config(images.string(), 2), "resnet.json");
  train(rc, quiet(tmp.sub("resnet")));
  const fs::path rex = tmp.path() / "resnet_export";
  const ExportSummary rs = export_checkpoint(tmp.sub("resnet"), rex, {});
  EXPECT_EQ(rs.format, "torchvision");
  EXPECT_NE(rs.usage.find("torchvision.models.resnet18(num_classes=2)"), std::string::npos) << rs.usage;
  const nlohmann::json rcfg = io::read_json_file((rex / "config.json").string());
  EXPECT_EQ(rcfg["architecture"], "resnet18");
  EXPECT_EQ(rcfg["cifar_stem"], true);
  EXPECT_EQ(rcfg["id2label"].size(), 2u);
  const auto ours = run_model(rc, tmp.sub("resnet"), 2, 0);
  std::map<std::string, Tensor> weights;
  for (const auto& [k, t] : io::load_safetensors((rex / "model.safetensors").string()).tensors) weights[k] = t;
  EXPECT_TRUE(weights.count("layer1.0.bn1.running_var"));
  EXPECT_TRUE(weights.count("fc.weight"));
  auto back = build_task_model(rc, 2, 0);
  back->module().load_state_dict(weights, /*strict=*/true);
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*back, rc), logits_on_eval_batch(*ours, rc)), 0.0);

  // ViT: a Hugging Face image classifier with its image processor's settings.
  const Config vc = Config::from_json(lb::testing::tiny_vit_config(images.string(), 2), "vit.json");
  train(vc, quiet(tmp.sub("vit")));
  const fs::path vex = tmp.path() / "vit_export";
  EXPECT_EQ(export_checkpoint(tmp.sub("vit"), vex, {}).format, "transformers");
  const nlohmann::json vcfg = io::read_json_file((vex / "config.json").string());
  EXPECT_EQ(vcfg["architectures"][0], "ViTForImageClassification");
  const nlohmann::json pp = io::read_json_file((vex / "preprocessor_config.json").string());
  EXPECT_EQ(pp["image_processor_type"], "ViTImageProcessor");
  EXPECT_EQ(pp["size"]["height"], vcfg["image_size"]);
  EXPECT_EQ(pp["image_mean"].size(), 3u);
  Config vi = vc;
  vi.model.pretrained = vex.string();
  vi.model.arch = nlohmann::json::object();
  const auto vours = run_model(vc, tmp.sub("vit"), 2, 0);
  EXPECT_EQ(max_rel_diff(logits_on_eval_batch(*build_task_model(vi, 2, 0), vc), logits_on_eval_batch(*vours, vc)),
            0.0);
}

TEST(Export, NeverWritesIntoADirectoryItDidNotCreate) {
  TempDir tmp("lb_export");
  const Config c = Config::from_json(tiny_text(1), "tiny.json");
  train(c, quiet(tmp.sub("run")));
  // A directory of the user's: refused, untouched.
  const fs::path mine = tmp.path() / "mine";
  fs::create_directories(mine);
  std::ofstream(mine / "config.json") << "{\"mine\": true}";
  EXPECT_THROW(export_checkpoint(tmp.sub("run"), mine, {.merge = false, .overwrite = true}), OutputRefused);
  EXPECT_EQ(io::read_json_file((mine / "config.json").string())["mine"], true);
  // An earlier export: only with overwrite, and a file of the user's there is kept.
  const fs::path ex = tmp.path() / "ex";
  export_checkpoint(tmp.sub("run"), ex, {});
  const std::string again = lb::testing::error_message([&] { export_checkpoint(tmp.sub("run"), ex, {}); });
  EXPECT_NE(again.find("pass --overwrite"), std::string::npos) << again;
  std::ofstream(ex / "notes.txt") << "mine";
  export_checkpoint(tmp.sub("run"), ex, {.merge = false, .overwrite = true});
  EXPECT_TRUE(fs::exists(ex / "notes.txt"));
  EXPECT_TRUE(fs::exists(ex / "model.safetensors"));
  // Not a checkpoint.
  EXPECT_NE(lb::testing::error_message([&] { export_checkpoint(mine.string(), tmp.path() / "z", {}); })
                .find("no checkpoint in it"),
            std::string::npos);
}

TEST(Export, OutputExportSetting) {
  nlohmann::json j = tiny_text(1);
  EXPECT_FALSE(Config::from_json(j, "t.json").output.export_model);
  j["output"]["export"] = "merged";
  const Config m = Config::from_json(j, "t.json");
  EXPECT_TRUE(m.output.export_model && m.output.export_merged);
  EXPECT_EQ(m.to_json()["output"]["export"], "merged");
  j["output"]["export"] = "yes";
  const std::string msg = lb::testing::error_message([&] { Config::from_json(j, "t.json"); });
  EXPECT_NE(msg.find("t.json: output.export: expected true, false or \"merged\""), std::string::npos) << msg;

  // An export that cannot succeed is refused before training, and nothing is written: "merged"
  // without LoRA; a LoRA adapter without a Hugging Face base for PEFT.
  lb::testing::TempDir tmp("export_setting");
  j["output"]["export"] = "merged";
  std::string m1 = lb::testing::error_message([&] { train(Config::from_json(j, "t.json"), quiet(tmp.sub("a"))); });
  EXPECT_NE(m1.find("t.json: output.export is \"merged\", which folds LoRA adapters into the weights, and this "
                    "config has no lora section"),
            std::string::npos)
      << m1;
  j["output"]["export"] = true;
  j["lora"] = {{"r", 2}};
  m1 = lb::testing::error_message([&] { train(Config::from_json(j, "t.json"), quiet(tmp.sub("b"))); });
  EXPECT_NE(m1.find("t.json: output.export is true, and a LoRA run on a randomly initialised model has no Hugging "
                    "Face base for PEFT"),
            std::string::npos)
      << m1;
  EXPECT_FALSE(fs::exists(tmp.sub("a")));
  EXPECT_FALSE(fs::exists(tmp.sub("b")));
  j["output"]["export"] = "merged";  // what the message proposes trains and exports
  EXPECT_EQ(train(Config::from_json(j, "t.json"), quiet(tmp.sub("c"))).steps, 1);
  EXPECT_TRUE(fs::exists(tmp.sub("c") + "/export/model.safetensors"));
}

}  // namespace
}  // namespace lb::train
