// The training loop end to end on the program's synthetic text task (no shared data needed):
// it learns, writes its run directory, keeps checkpoints by the retention rule, never
// overwrites a run, equals a large batch with accumulated micro-batches and continues
// bit-for-bit after an interruption, for every backward strategy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <sstream>
#include <fstream>

#include "lb/core/error.h"
#include "lb/data/synthetic_text.h"
#include "lb/data/text_dataset.h"
#include "lb/io/safetensors.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/task_data.h"
#include "lb/train/task_model.h"
#include "lb/train/trainer.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;

using lb::testing::TempDir;

nlohmann::json tiny(int64_t steps, double dropout = 0.1) { return lb::testing::tiny_bert_config(steps, dropout); }

using lb::testing::quiet;

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// Per-strategy settings for the equivalence tests: INSTANT at a fixed rank, recalibrated
// within the run; HOT with its transforms but without stochastic rounding (whose draws are
// keyed by micro-batch, so they differ by design between 1 x 8 and 2 x 4).
nlohmann::json backward_for(const std::string& s) {
  if (s == "instant")
    return {{"default", {{"type", "instant"}, {"rank", 4}, {"calib_every", 3}, {"calib_batches", 2}, {"gram_dtype", "f64"}}}};
  if (s == "hot") return {{"default", {{"type", "hot"}, {"quantize", false}}}};
  return {{"default", {{"type", "vanilla"}}}};
}

nlohmann::json backward_quantized(const std::string& s) {
  if (s == "hot") return {{"default", {{"type", "hot"}}}};
  return backward_for(s);
}

TEST(SyntheticText, DeterministicAndBalanced) {
  const auto a = data::make_synthetic_text(400, 100);
  const auto b = data::make_synthetic_text(400, 100);
  EXPECT_EQ(a.train_text, b.train_text);
  EXPECT_EQ(a.eval_labels, b.eval_labels);
  EXPECT_NE(a.train_text, data::make_synthetic_text(400, 100, 5).train_text);
  int64_t pos = 0;
  for (int64_t l : a.train_labels) pos += l;
  EXPECT_GT(pos, 150);
  EXPECT_LT(pos, 250);
  EXPECT_EQ(a.vocab.at(0), "[PAD]");
}

TEST(TextLoader, EpochOrderPaddingAndResumePosition) {
  auto d = std::make_shared<data::TextDataset>();
  for (int64_t i = 0; i < 10; ++i) {
    data::Encoding e;
    for (int64_t t = 0; t <= i % 4 + 1; ++t) e.input_ids.push_back(100 + i);
    e.token_type_ids.assign(e.input_ids.size(), 0);
    d->encodings.push_back(e);
    d->labels.push_back(static_cast<double>(i % 2));
    d->indices.push_back(i);
  }
  data::TextLoaderOptions o;
  o.batch_size = 4;
  o.seed = 3;
  data::TextLoader loader(d, o);
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  std::vector<int64_t> seen;
  std::vector<data::Batch> epoch1;
  loader.start_epoch(1);
  for (data::Batch b; loader.next(b);) {
    const int64_t T = b.inputs.at("input_ids").size(1);
    int64_t longest = 0;
    for (int64_t i : b.indices) longest = std::max<int64_t>(longest, d->encodings[i].input_ids.size());
    EXPECT_EQ(T, longest);  // dynamic padding to the batch's longest
    const auto mask = b.inputs.at("attention_mask").to_double_vector();
    for (size_t r = 0; r < b.indices.size(); ++r)
      for (int64_t t = 0; t < T; ++t)
        EXPECT_EQ(mask[r * T + t], t < static_cast<int64_t>(d->encodings[b.indices[r]].input_ids.size()) ? 1.0 : 0.0);
    seen.insert(seen.end(), b.indices.begin(), b.indices.end());
    epoch1.push_back(b);
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // Starting the epoch at batch 2 gives the third batch of the full epoch.
  loader.start_epoch(1, 2);
  data::Batch b;
  ASSERT_TRUE(loader.next(b));
  EXPECT_EQ(b.indices, epoch1[2].indices);
  EXPECT_FALSE(loader.next(b));
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next(b));
  EXPECT_NE(b.indices, epoch1[0].indices);  // epochs are shuffled differently
}

TEST(Trainer, LearnsAndWritesTheRunDirectory) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(0);
  j["train"] = {{"epochs", 4}, {"log_every", 10}, {"seed", 1}, {"keep_checkpoints", 1}};
  j["data"]["synthetic_train"] = 640;
  j["data"]["synthetic_eval"] = 200;
  j["data"]["padding"] = "dynamic";
  j["optimizer"]["lr"] = 3e-3;
  const Config c = Config::from_json(j, "tiny.json");
  const std::string run = tmp.sub("run");
  const TrainResult r = train(c, quiet(run));
  EXPECT_EQ(r.steps, 320);
  EXPECT_GT(r.final_eval.value("eval_accuracy", 0.0), 0.9) << r.final_eval.dump();
  EXPECT_TRUE(r.final_eval.contains("eval_loss"));
  EXPECT_TRUE(fs::exists(run + "/config.json"));
  EXPECT_TRUE(fs::exists(run + "/plan.txt"));
  EXPECT_TRUE(fs::exists(run + "/eval_results.json"));
  const auto lines = read_lines(run + "/metrics.jsonl");
  ASSERT_GT(lines.size(), 3u);
  const auto first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["type"], "run");
  EXPECT_TRUE(first.contains("git_commit"));
  EXPECT_TRUE(first["environment"].contains("cpu"));
  EXPECT_EQ(first["config"]["train"]["seed"], 1);
  int evals = 0, trains = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto l = nlohmann::json::parse(lines[i]);
    if (l["type"] == "eval") {
      ++evals;
      EXPECT_TRUE(l.contains("eval_accuracy"));
    }
    if (l["type"] == "train") {
      ++trains;
      for (const char* k : {"loss", "lr", "grad_norm", "step_ms", "examples_per_s", "saved_bytes", "peak_bytes_by_tag"})
        EXPECT_TRUE(l.contains(k)) << k;
    }
  }
  EXPECT_EQ(evals, 4);  // one per epoch
  EXPECT_EQ(trains, 32);
  // Retention: the newest checkpoint and the best one.
  std::vector<std::string> ckpts;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0) ckpts.push_back(e.path().filename().string());
  EXPECT_TRUE(std::find(ckpts.begin(), ckpts.end(), "checkpoint-320") != ckpts.end());
  EXPECT_TRUE(fs::exists(r.best_checkpoint)) << r.best_checkpoint;
  EXPECT_LE(ckpts.size(), 2u);
  const auto results = nlohmann::json::parse(std::ifstream(run + "/eval_results.json"));
  EXPECT_EQ(results["final"]["eval_accuracy"], r.final_eval["eval_accuracy"]);
  EXPECT_GE(results["best"]["eval_accuracy"].get<double>(), results["final"]["eval_accuracy"].get<double>());
  // The whole step's memory by category: AdamW's f32 moments are twice the parameters.
  const auto& mem = results["memory"];
  const int64_t params = mem["peak_bytes_by_tag"]["parameter"];
  EXPECT_GT(params, 0);
  EXPECT_EQ(mem["peak_bytes_by_tag"]["optimizer"].get<int64_t>(), 2 * params);
  EXPECT_GE(mem["peak_bytes"].get<int64_t>(), 4 * params);  // + gradients, + what backward keeps
  EXPECT_GT(mem["process_max_rss_bytes"].get<int64_t>(), mem["peak_bytes"].get<int64_t>());
}

// precision bf16 (every float product on bf16 operands, f32 accumulation) learns the task
// as f32 does, and is really in effect (the loss curve moves).
TEST(Trainer, Bf16PrecisionLearnsLikeF32) {
  TempDir tmp("lb_trainer_bf16");
  auto run = [&](const std::string& precision) {
    nlohmann::json j = tiny(0);
    j["train"] = {{"epochs", 3}, {"log_every", 10}, {"seed", 1}, {"precision", precision}};
    j["data"]["synthetic_train"] = 640;
    j["data"]["synthetic_eval"] = 200;
    j["data"]["padding"] = "dynamic";
    j["optimizer"]["lr"] = 3e-3;
    return train(Config::from_json(j, "tiny.json"), quiet(tmp.sub(precision)));
  };
  const TrainResult f32 = run("f32"), bf16 = run("bf16");
  const double acc32 = f32.final_eval.value("eval_accuracy", 0.0), acc16 = bf16.final_eval.value("eval_accuracy", 0.0);
  EXPECT_GT(acc16, 0.9) << bf16.final_eval.dump();
  EXPECT_NEAR(acc16, acc32, 0.03);
  ASSERT_EQ(f32.losses.size(), bf16.losses.size());
  EXPECT_NE(f32.losses.back(), bf16.losses.back());
  EXPECT_NEAR(f32.losses[5], bf16.losses[5], 0.05 * std::fabs(f32.losses[5]));
}

// --overwrite replaces only a run directory leanback created, and deletes only the files it
// wrote there; a directory of the user's is refused with or without it.
TEST(Trainer, NeverOverwritesARunDirectory) {
  TempDir tmp("lb_trainer");
  const Config c = Config::from_json(tiny(2), "tiny.json");
  const std::string users = tmp.sub("users");
  fs::create_directories(users + "/src");
  std::ofstream(users + "/thesis.tex") << "mine";
  std::ofstream(users + "/src/main.cpp") << "mine";
  for (bool overwrite : {false, true}) {
    TrainOptions o = quiet(users);
    o.overwrite = overwrite;
    try {
      train(c, o);
      FAIL() << "expected an error";
    } catch (const OutputRefused& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(overwrite ? "--overwrite refused: " + users + " is not empty and was not created by leanback"
                                 : "run directory " + users + " is not empty and was not created by leanback"),
                std::string::npos)
          << m;
    }
    EXPECT_TRUE(fs::exists(users + "/thesis.tex"));
    EXPECT_TRUE(fs::exists(users + "/src/main.cpp"));
  }
  // A run directory of ours: refused without --overwrite, replaced with it, keeping a file the
  // user added there and the target of a link planted under a checkpoint's name.
  const std::string run = tmp.sub("run");
  train(c, quiet(run));
  std::ofstream(run + "/notes.txt") << "mine";
  fs::create_directories(tmp.sub("elsewhere"));
  std::ofstream(tmp.sub("elsewhere") + "/model.safetensors") << "precious";
  fs::create_directory_symlink(tmp.sub("elsewhere"), run + "/checkpoint-7");
  try {
    train(c, quiet(run));
    FAIL() << "expected an error";
  } catch (const OutputRefused& e) {
    EXPECT_NE(std::string(e.what()).find("already exists and is not empty; pass --overwrite"), std::string::npos);
  }
  TrainOptions o = quiet(run);
  o.overwrite = true;
  // The link is not a checkpoint this run directory's record names (not ours to delete), and a
  // checkpoint at step 7 would replace it: refused before anything is cleared.
  std::string m = lb::testing::error_message([&] { train(c, o); });
  EXPECT_NE(m.find("holds checkpoint-7, which leanback did not write there"), std::string::npos) << m;
  EXPECT_TRUE(fs::exists(fs::symlink_status(run + "/checkpoint-7")));
  EXPECT_TRUE(fs::exists(run + "/config.json"));
  fs::remove(run + "/checkpoint-7");
  train(c, o);
  EXPECT_TRUE(fs::exists(run + "/notes.txt"));
  EXPECT_TRUE(fs::exists(run + "/config.json"));
  EXPECT_TRUE(fs::exists(tmp.sub("elsewhere") + "/model.safetensors"));
  // Resuming one run into another run's directory: refused without --overwrite, as a new run.
  const std::string other = tmp.sub("other");
  train(c, quiet(other));
  const auto before = read_lines(other + "/metrics.jsonl");
  TrainOptions into = quiet(other);
  into.resume = run;
  EXPECT_THROW(train(c, into), OutputRefused);
  EXPECT_EQ(read_lines(other + "/metrics.jsonl"), before);
}

// Divergence (lr 1e30): no checkpoint is written from non-finite weights, so the one the
// error names loads (finite) and retention (keep 1) never deleted it.
TEST(Trainer, NonFiniteLossStopsNamingTheStep) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(6);
  j["optimizer"] = {{"type", "sgd"}, {"lr", 1e30}};
  j["train"]["max_grad_norm"] = 0;
  j["train"]["save_every"] = 1;
  j["train"]["keep_checkpoints"] = 1;
  const std::string run = tmp.sub("run");
  // The first step is at a tiny rate, so checkpoint-1 is good; the rate then jumps.
  j["schedule"] = {{"type", "linear"}, {"warmup_steps", 5}};
  const Config c = Config::from_json(j, "tiny.json");
  std::string named;
  try {
    train(c, quiet(run));
    FAIL() << "expected a divergence";
  } catch (const Diverged& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("step "), std::string::npos) << m;
    const size_t at = m.find("the last good checkpoint is ");
    ASSERT_NE(at, std::string::npos) << m;
    named = m.substr(at + 28);
  }
  ASSERT_TRUE(fs::exists(named + "/trainer_state.json")) << named;
  int64_t checkpoints = 0;
  for (const auto& e : fs::directory_iterator(run)) checkpoints += e.path().filename().string().rfind("checkpoint-", 0) == 0;
  EXPECT_EQ(checkpoints, 1);
  const auto w = io::load_safetensors(named + "/model.safetensors");
  EXPECT_EQ(first_non_finite(w.tensors), "");
}

// A checkpoint holding NaN weights (as older versions saved on divergence) is refused by
// eval / predict / resume, naming the tensor.
TEST(Trainer, NonFiniteCheckpointIsRefused) {
  TempDir tmp("lb_trainer");
  const Config c = Config::from_json(tiny(2), "tiny.json");
  const std::string run = tmp.sub("run");
  const TrainResult r = train(c, quiet(run));
  const std::string model = r.last_checkpoint + "/model.safetensors";
  auto f = io::load_safetensors(model);
  nn::NamedTensors w(f.tensors.begin(), f.tensors.end());
  ASSERT_EQ(w[3].second.dtype(), DType::F32);
  Tensor bad = w[3].second.clone();
  bad.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  w[3].second = bad;
  io::save_safetensors(model, w, f.metadata);
  const TaskData data = load_task_data(c);
  auto m = build_task_model(c, data.num_labels, data.vocab_size);
  try {
    load_checkpoint(r.last_checkpoint, m->module(), nullptr);
    FAIL() << "expected an error";
  } catch (const NonFiniteState& e) {
    EXPECT_NE(std::string(e.what()).find("tensor " + w[3].first + " holds NaN or inf"), std::string::npos) << e.what();
  }
}

// An evaluation that fails does not lose the training: the step's checkpoint is written and
// named, and the run resumes from it.
TEST(Trainer, FailedEvaluationKeepsTheTraining) {
  TempDir tmp("lb_trainer");
  const Config c = Config::from_json(tiny(4), "tiny.json");
  const std::string run = tmp.sub("run");
  TrainOptions o = quiet(run);
  o.before_eval = [](int64_t step) {
    if (step == 4) throw Error("eval data broken");
  };
  try {
    train(c, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("evaluation at step 4 failed: eval data broken"), std::string::npos) << m;
    EXPECT_NE(m.find("training up to step 4 is saved in " + run + "/checkpoint-4"), std::string::npos) << m;
  }
  TrainOptions again = quiet(run);
  again.resume = run;
  const TrainResult r = train(c, again);
  EXPECT_EQ(r.steps, 4);
  EXPECT_TRUE(r.final_eval.contains("eval_accuracy"));
}

// A pretrained model whose position table is shorter than data.max_seq_len is refused before
// any training, naming its config.json.
TEST(Trainer, PretrainedPositionLimitIsCheckedBeforeTraining) {
  TempDir tmp("lb_trainer");
  const Config c = Config::from_json(tiny(1), "tiny.json");
  const TrainResult r = train(c, quiet(tmp.sub("base")));
  const std::string hf = tmp.sub("hf");
  fs::create_directories(hf);
  // The trained weights as a Hugging Face directory whose position table has 16 rows.
  const auto f = io::load_safetensors(r.last_checkpoint + "/model.safetensors");
  nn::NamedTensors w;
  int64_t vocab = 0;
  for (const auto& [name, t] : f.tensors) {
    if (name.find("word_embeddings.weight") != std::string::npos) vocab = t.size(0);
    if (name.find("position_embeddings.weight") == std::string::npos) {
      w.emplace_back(name, t);
      continue;
    }
    Tensor cut = Tensor::empty({16, t.size(1)}, t.dtype());
    std::copy(t.data<float>(), t.data<float>() + 16 * t.size(1), cut.data<float>());
    w.emplace_back(name, cut);
  }
  io::save_safetensors(hf + "/model.safetensors", w, {{"format", "pt"}});
  nlohmann::json cfg = {{"model_type", "bert"}, {"architectures", {"BertForSequenceClassification"}},
                        {"hidden_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                        {"intermediate_size", 64}, {"vocab_size", vocab},
                        {"max_position_embeddings", 16}, {"type_vocab_size", 2}};
  std::ofstream(hf + "/config.json") << cfg.dump();
  nlohmann::json j = tiny(3);
  j["model"] = {{"type", "bert"}, {"pretrained", hf}};
  const std::string m = lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("run"))); });
  EXPECT_NE(m.find("data.max_seq_len 32 exceeds max_position_embeddings 16 of the pretrained model (" + hf +
                   "/config.json)"),
            std::string::npos)
      << m;
  EXPECT_FALSE(fs::exists(tmp.sub("run") + "/metrics.jsonl"));
}

// The resolved config.json shows every backward strategy setting with its default (INSTANT's
// oversampling under --strategy instant, though the config names none), and parses back.
TEST(Trainer, ResolvedConfigShowsEveryStrategySetting) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(1);
  j["backward"] = {{"rules", {{{"match", "bert.encoder.layer.0.*"}, {"type", "hot"}}}}};
  TrainOptions o = quiet(tmp.sub("run"));
  o.strategy = "instant";
  train(Config::from_json(j, "tiny.json"), o);
  const auto resolved = nlohmann::json::parse(std::ifstream(tmp.sub("run") + "/config.json"));
  const auto& b = resolved["backward"];
  EXPECT_TRUE(b["strategies"]["instant"].contains("oversampling")) << b.dump();
  EXPECT_TRUE(b["strategies"]["hot"].contains("gx_bits")) << b.dump();
  EXPECT_EQ(b["rules"][0]["match"], "bert.encoder.layer.0.*");
  EXPECT_TRUE(b["rules"][0].contains("hla_rank")) << b.dump();
  EXPECT_EQ(b["default"]["type"], "vanilla");
  // It is a config: training from it plans the same layers the same way.
  const Config again = Config::from_json(resolved, "config.json");
  TrainOptions o2 = quiet(tmp.sub("again"));
  o2.strategy = "instant";
  train(again, o2);
  const auto layer_strategy = [&](const std::string& run) {  // (layer, strategy) of every line
    std::vector<std::string> out;
    for (const auto& l : read_lines(run + "/plan.txt")) {
      std::istringstream in(l);
      std::string layer, kind, strategy;
      in >> layer >> kind >> strategy;
      out.push_back(layer + " " + strategy);
    }
    return out;
  };
  EXPECT_EQ(layer_strategy(tmp.sub("again")), layer_strategy(tmp.sub("run")));
}

// --resume with a new optimizer.lr trains at it (the schedule continues from the new rate),
// as config.json records; a negative rate in the checkpoint is refused.
TEST(Trainer, ResumeAppliesANewLearningRate) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(6);
  j["schedule"] = {{"type", "constant"}};
  j["train"]["log_every"] = 1;
  TrainOptions first = quiet(tmp.sub("run"));
  first.interrupt_after = 3;
  train(Config::from_json(j, "tiny.json"), first);
  // A copy of the checkpoint, for the negative rate below.
  fs::create_directories(tmp.sub("neg"));
  fs::copy(tmp.sub("run") + "/checkpoint-3", tmp.sub("neg") + "/checkpoint-3", fs::copy_options::recursive);
  j["optimizer"]["lr"] = 5e-3;
  TrainOptions second = quiet(tmp.sub("run"));
  second.resume = tmp.sub("run");
  ::testing::internal::CaptureStderr();
  train(Config::from_json(j, "tiny.json"), second);
  const std::string notes = ::testing::internal::GetCapturedStderr();
  // Said once, not once per parameter group (AdamW's decayed and undecayed groups share it).
  size_t said = 0;
  for (size_t at = notes.find("optimizer.lr is now"); at != std::string::npos;
       at = notes.find("optimizer.lr is now", at + 1))
    ++said;
  EXPECT_EQ(said, 1u) << notes;
  std::vector<double> lrs;
  for (const auto& l : read_lines(tmp.sub("run") + "/metrics.jsonl")) {
    const auto m = nlohmann::json::parse(l);
    if (m["type"] == "train") lrs.push_back(m["lr"].get<double>());
  }
  ASSERT_EQ(lrs.size(), 6u);
  EXPECT_DOUBLE_EQ(lrs[2], 2e-3);  // the config's rate before the interruption
  EXPECT_DOUBLE_EQ(lrs[3], 5e-3);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(std::ifstream(tmp.sub("run") + "/config.json"))["optimizer"]["lr"].get<double>(),
                   5e-3);
  // A negative rate in trainer_state.json would make training ascend.
  const std::string state = tmp.sub("neg") + "/checkpoint-3/trainer_state.json";
  nlohmann::json st = nlohmann::json::parse(std::ifstream(state));
  st["optimizer"]["groups"][0]["initial_lr"] = -1e-3;
  std::ofstream(state) << st.dump();
  TrainOptions third = quiet(tmp.sub("neg"));
  third.resume = tmp.sub("neg");
  const std::string m = lb::testing::error_message([&] { train(Config::from_json(j, "tiny.json"), third); });
  EXPECT_NE(m.find("optimizer.groups[0]: lr, initial_lr and weight_decay must be non-negative"), std::string::npos) << m;
}

TEST(Trainer, PlanRuleMatchingNothingIsAnError) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(1);
  j["backward"] = {{"rules", {{{"match", "bert.encoder.layer.9.*"}, {"type", "hot"}}}}};
  const Config c = Config::from_json(j, "tiny.json");
  try {
    train(c, quiet(tmp.sub("run")));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward.rules[0] (match 'bert.encoder.layer.9.*') decides no "
                                         "Linear/Conv2d layer"),
              std::string::npos)
        << e.what();
  }
  j["backward"] = {{"rules", {{{"match", "*LayerNorm"}, {"type", "hot"}}}}};
  try {
    train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("run2")));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("(LayerNorm), which have no pluggable backward"), std::string::npos)
        << e.what();
  }
}

// Padding-free BERT (model.skip_padding): "auto" resolves to true, for every strategy; the
// loss curve equals the padded run's (no dropout: its draws cover other rows).
TEST(Trainer, SkipPaddingResolvesToTrueAndKeepsTheLossCurve) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(4, /*dropout=*/0.0);
  j["data"]["padding"] = "dynamic";
  const auto resolved = [&](const std::string& run) {
    return nlohmann::json::parse(std::ifstream(run + "/config.json"))["model"]["skip_padding"];
  };
  const TrainResult packed = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("packed")));
  EXPECT_EQ(resolved(tmp.sub("packed")), true);
  j["model"]["skip_padding"] = false;
  const TrainResult padded = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("padded")));
  EXPECT_EQ(resolved(tmp.sub("padded")), false);
  ASSERT_EQ(packed.losses.size(), padded.losses.size());
  for (size_t i = 0; i < packed.losses.size(); ++i)
    EXPECT_NEAR(packed.losses[i], padded.losses[i], 1e-5 * std::abs(padded.losses[i])) << i;
  // The synthetic batches do have padding: the padding-free run keeps fewer bytes for backward.
  const auto saved = [&](const std::string& run) {
    for (const auto& l : read_lines(run + "/metrics.jsonl")) {
      const auto m = nlohmann::json::parse(l);
      if (m["type"] == "train") return m["saved_bytes"].get<double>();
    }
    return 0.0;
  };
  EXPECT_LT(saved(tmp.sub("packed")), 0.9 * saved(tmp.sub("padded")));

  j["model"]["skip_padding"] = "auto";
  j["data"]["padding"] = "auto";
  j["backward"] = backward_for("instant");
  train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("instant")));
  // INSTANT runs padding-free too: its token-axis bases span max_seq_len and each packed
  // sequence projects with their first L_b columns. It trains, and keeps fewer bytes than
  // the same run on batches padded to max_seq_len.
  const auto padding = [&](const std::string& run) {
    return nlohmann::json::parse(std::ifstream(run + "/config.json"))["data"]["padding"];
  };
  EXPECT_EQ(resolved(tmp.sub("instant")), true);
  EXPECT_EQ(padding(tmp.sub("instant")), "dynamic");
  j["data"]["padding"] = "max_length";
  j["model"]["skip_padding"] = false;
  train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("instant_fixed")));
  EXPECT_LT(saved(tmp.sub("instant")), 0.9 * saved(tmp.sub("instant_fixed")));
}

std::map<std::string, std::vector<double>> weights(const std::string& checkpoint) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [n, t] : io::load_safetensors(checkpoint + "/model.safetensors").tensors)
    out[n] = t.to_double_vector();
  return out;
}

// Kept-tensor codecs and recomputation (config memory.codecs, memory.recompute) in a run: fewer
// bytes kept, stochastic rounding keyed by the step so a resumed run equals an uninterrupted
// one, and rules or globs that select nothing are errors naming them.
TEST(Trainer, CodecsAndRecomputationKeepLessResumeExactlyAndRulesMustMatch) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(6);
  j["train"]["grad_accum"] = 2;
  j["train"]["eval_every"] = 4;
  j["train"]["log_every"] = 1;
  const TrainResult plain = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("plain")));
  j["memory"] = {{"codecs", {{{"op", "gelu"}, {"codec", "int8"}}, {{"codec", "int4"}}}},
                 {"recompute", {"bert.encoder.layer.1"}}};
  const Config c = Config::from_json(j, "tiny.json");
  const TrainResult full = train(c, quiet(tmp.sub("full")));
  const auto saved = [&](const std::string& run) {
    for (const auto& l : read_lines(tmp.sub(run) + "/metrics.jsonl"))
      if (const auto m = nlohmann::json::parse(l); m["type"] == "train") return m["saved_bytes"].get<double>();
    return 0.0;
  };
  EXPECT_LT(saved("full"), 0.35 * saved("plain"));
  ASSERT_EQ(full.losses.size(), plain.losses.size());
  EXPECT_NE(full.losses, plain.losses);
  for (size_t i = 0; i < full.losses.size(); ++i) EXPECT_NEAR(full.losses[i], plain.losses[i], 0.05) << i;
  TrainOptions first = quiet(tmp.sub("cut"));
  first.interrupt_after = 3;
  EXPECT_TRUE(train(c, first).interrupted);
  TrainOptions second = quiet(tmp.sub("cut"));
  second.resume = tmp.sub("cut");
  const TrainResult rest = train(c, second);
  ASSERT_EQ(rest.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rest.losses[i], full.losses[3 + i]) << "step " << 3 + i;
  EXPECT_EQ(weights(rest.last_checkpoint), weights(full.last_checkpoint));

  j["memory"] = {{"codecs", {{{"codec", "int8"}}, {{"op", "gelu"}, {"codec", "int4"}}}}};
  std::string m = testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("shadowed"))); });
  EXPECT_NE(m.find("memory.codecs[1] (match '*', op 'gelu', role '*') decided no kept tensor"), std::string::npos) << m;
  EXPECT_NE(m.find("gelu"), std::string::npos) << m;
  j["memory"] = {{"codecs", {{{"match", "encoder.*"}, {"codec", "int8"}}}}};
  m = testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("typo"))); });
  EXPECT_NE(m.find("tiny.json: memory.codecs[0].match 'encoder.*' matches no module"), std::string::npos) << m;
  j["memory"] = {{"recompute", {"bert.encoder.layer.*", "*.attention"}}};
  m = testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("noblock"))); });
  EXPECT_NE(m.find("tiny.json: memory.recompute[1] '*.attention' matches no block of this bert model (blocks: "
                   "'bert.encoder.layer.0', 'bert.encoder.layer.1')"),
            std::string::npos)
      << m;

  // Recomputed in bf16: the first step's loss as exact (its forward is untouched), the rest
  // near the exact run's, as few bytes kept as recomputation keeps; globs must match too.
  j["memory"] = {{"recompute_bf16", {"bert.encoder.layer.*"}}};
  const TrainResult bf16 = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("bf16")));
  ASSERT_EQ(bf16.losses.size(), plain.losses.size());
  EXPECT_EQ(bf16.losses[0], plain.losses[0]);
  EXPECT_NE(bf16.losses, plain.losses);
  for (size_t i = 0; i < bf16.losses.size(); ++i) EXPECT_NEAR(bf16.losses[i], plain.losses[i], 0.05) << i;
  EXPECT_LT(saved("bf16"), 0.5 * saved("plain"));
  j["memory"] = {{"recompute_bf16", {"*.attention"}}};
  m = testing::error_message([&] { train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("nobf16"))); });
  EXPECT_NE(m.find("tiny.json: memory.recompute_bf16[0] '*.attention' matches no block"), std::string::npos) << m;
}

class TrainerByStrategy : public ::testing::TestWithParam<std::string> {};

TEST_P(TrainerByStrategy, AccumulatedMicroBatchesEqualOneLargeBatch) {
  TempDir tmp("lb_trainer");
  nlohmann::json big = tiny(4, /*dropout=*/0.0);
  big["backward"] = backward_for(GetParam());
  // HOT's HLA compresses g_w over blocks of 16 consecutive rows of the flattened token axis.
  // On the padded (B, 32) layout every block lies inside one sequence, so the blocks of a
  // batch of 8 are those of its two halves; padding-free rows pack sequences back to back and
  // a block can span two of them, which splitting the batch changes.
  if (GetParam() == "hot") big["model"]["skip_padding"] = false;
  nlohmann::json small = big;
  small["data"]["batch_size"] = 4;
  small["train"]["grad_accum"] = 2;
  const TrainResult a = train(Config::from_json(big, "big.json"), quiet(tmp.sub("big")));
  const TrainResult b = train(Config::from_json(small, "small.json"), quiet(tmp.sub("small")));
  ASSERT_EQ(a.losses.size(), 4u);
  ASSERT_EQ(b.losses.size(), 4u);
  for (size_t i = 0; i < a.losses.size(); ++i) EXPECT_NEAR(a.losses[i], b.losses[i], 1e-5 * std::abs(a.losses[i]));
  const auto wa = weights(a.last_checkpoint), wb = weights(b.last_checkpoint);
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [n, v] : wa) {
    const auto& u = wb.at(n);
    for (size_t i = 0; i < v.size(); ++i) worst = std::max(worst, std::abs(v[i] - u[i]) / (1e-3 + std::abs(v[i])));
  }
  // f32 sums in a different order (two GEMMs of 4 rows vs one of 8), amplified by Adam's
  // normalisation over 4 steps (measured: 1.4e-5 to 1.8e-5 for the three strategies; INSTANT
  // needs its Gram statistics in f64, or its rank-4 bases rotate with f32 rounding: 3.5e-3).
  EXPECT_LT(worst, 2e-4) << GetParam();
}

// With kept-tensor codecs the probe measures every layer end to end, vanilla ones too: an f32
// "codec" keeps the exact tensors (cosine 1), int4 does not; neither changes the training run.
TEST(Trainer, GradProbeMeasuresCodecsEndToEnd) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(3);
  j["train"]["grad_probe_every"] = 2;
  std::map<std::string, std::vector<double>> cosines;  // by codec: every end-to-end cosine
  for (const char* codec : {"f32", "int4"}) {
    j["memory"] = {{"codecs", {{{"codec", codec}}}}};
    const std::string run = std::string("probed_") + codec;
    const TrainResult probed = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub(run)));
    nlohmann::json unprobed = j;
    unprobed["train"]["grad_probe_every"] = 0;
    EXPECT_EQ(train(Config::from_json(unprobed, "tiny.json"), quiet(tmp.sub(run + "_plain"))).losses, probed.losses)
        << codec;
    for (const auto& line : read_lines(tmp.sub(run) + "/metrics.jsonl")) {
      const auto l = nlohmann::json::parse(line);
      if (l["type"] != "probe") continue;
      for (const auto& layer : l["layers"]) {
        EXPECT_EQ(layer["type"], "vanilla");
        EXPECT_FALSE(layer.contains("local")) << layer;  // a vanilla layer's own backward is exact
        for (const char* g : {"g_w", "g_x"})
          if (layer["end_to_end"].contains(g)) cosines[codec].push_back(layer["end_to_end"][g]["cos"]);
      }
    }
  }
  ASSERT_GT(cosines["f32"].size(), 10u);
  ASSERT_EQ(cosines["int4"].size(), cosines["f32"].size());
  for (double c : cosines["f32"]) EXPECT_NEAR(c, 1.0, 1e-12);
  double lowest = 1;
  for (double c : cosines["int4"]) {
    EXPECT_GT(c, 0.5);
    lowest = std::min(lowest, c);
  }
  EXPECT_LT(lowest, 0.9999);  // 4 bits per kept element are not exact
}

// The gradient-fidelity probe logs per-layer closeness of the strategy's gradients to the
// exact ones and leaves training exactly as it was (eval-mode passes, own HOT key).
TEST_P(TrainerByStrategy, GradProbeLogsClosenessAndLeavesTrainingUnchanged) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(6);  // dropout on: the probe must not draw from its stream
  j["backward"] = backward_quantized(GetParam());
  const TrainResult plain = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("plain")));
  j["train"]["grad_probe_every"] = 3;
  const TrainResult probed = train(Config::from_json(j, "tiny.json"), quiet(tmp.sub("probed")));
  EXPECT_EQ(plain.losses, probed.losses) << GetParam();
  int probes = 0, figures = 0;
  for (const auto& line : read_lines(tmp.sub("probed") + "/metrics.jsonl")) {
    const auto l = nlohmann::json::parse(line);
    if (l["type"] != "probe") continue;
    ++probes;
    for (const auto& layer : l["layers"])
      for (const char* where : {"local", "end_to_end"})
        if (layer.contains(where))
          for (auto it = layer[where].begin(); it != layer[where].end(); ++it) {
            const double c = it.value()["cos"];
            EXPECT_GE(c, -1.0 - 1e-9);
            EXPECT_LE(c, 1.0 + 1e-9);
            EXPECT_GE(it.value()["rel_err"].get<double>(), 0.0);
            // The approximation is not the exact gradient, but close to it in direction.
            EXPECT_GT(c, 0.3) << layer["layer"] << " " << where << " " << it.key();
            ++figures;
          }
  }
  if (GetParam() == "vanilla") {
    EXPECT_EQ(probes, 0);  // nothing compressed to probe
  } else {
    EXPECT_EQ(probes, 2);  // steps 0 and 3
    EXPECT_GT(figures, 10);
  }
  const auto results = nlohmann::json::parse(std::ifstream(tmp.sub("probed") + "/eval_results.json"));
  EXPECT_TRUE(results.contains("grad_probe_ms_total"));
}

TEST_P(TrainerByStrategy, InterruptedAndResumedEqualsUninterrupted) {
  TempDir tmp("lb_trainer");
  nlohmann::json j = tiny(6);  // dropout on: the generator's position must be restored
  j["backward"] = backward_quantized(GetParam());
  j["train"]["grad_accum"] = 2;
  j["train"]["eval_every"] = 4;
  const Config c = Config::from_json(j, "tiny.json");
  const TrainResult full = train(c, quiet(tmp.sub("full")));
  TrainOptions first = quiet(tmp.sub("cut"));
  first.interrupt_after = 3;
  const TrainResult cut = train(c, first);
  EXPECT_TRUE(cut.interrupted);
  EXPECT_EQ(cut.steps, 3);
  EXPECT_TRUE(fs::exists(tmp.sub("cut") + "/checkpoint-3/trainer_state.json"));
  TrainOptions second = quiet(tmp.sub("cut"));
  second.resume = tmp.sub("cut");
  const TrainResult rest = train(c, second);
  EXPECT_EQ(rest.steps, 6);
  ASSERT_EQ(rest.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(rest.losses[i], full.losses[3 + i]) << "step " << 3 + i;
  EXPECT_EQ(weights(rest.last_checkpoint), weights(full.last_checkpoint)) << GetParam();
  EXPECT_EQ(rest.final_eval["eval_loss"], full.final_eval["eval_loss"]);
  // The resumed run's metrics.jsonl reads like one run: a single line per step.
  int64_t train_lines = 0, run_lines = 0;
  for (const auto& l : read_lines(tmp.sub("cut") + "/metrics.jsonl")) {
    const auto m = nlohmann::json::parse(l);
    train_lines += m["type"] == "train";
    run_lines += m["type"] == "run";
  }
  EXPECT_EQ(run_lines, 1);
  EXPECT_EQ(train_lines, 3);  // log_every 2: steps 2, 4, 6
  // eval_results.json's totals span both segments, as an uninterrupted run's do.
  const auto results = [&](const std::string& d) {
    return nlohmann::json::parse(std::ifstream(tmp.sub(d) + "/eval_results.json"));
  };
  const auto whole = results("full"), resumed = results("cut");
  EXPECT_NEAR(resumed["train_runtime_s"].get<double>(), cut.train_runtime_s + rest.train_runtime_s, 1e-9);
  EXPECT_EQ(resumed["calibration"]["calibrations"], whole["calibration"]["calibrations"]);
  EXPECT_EQ(resumed["calibration"]["steps"], whole["calibration"]["steps"]);
  EXPECT_GT(resumed["train_samples_per_second"].get<double>(), 0.0);
  // ... and so do its per-layer counts (they covered the last segment alone before).
  ASSERT_EQ(resumed["layers"].size(), whole["layers"].size());
  for (size_t i = 0; i < whole["layers"].size(); ++i) {
    const auto &w = whole["layers"][i], &r = resumed["layers"][i];
    for (const char* key : {"backward_calls", "calibration_backward_calls"})
      EXPECT_EQ(r["measured"][key], w["measured"][key]) << key << " of " << w["layer"];
    EXPECT_GT(r["measured"]["backward_ms_total"].get<double>(), 0.0) << w["layer"];
    if (w.contains("instant")) {
      EXPECT_EQ(r["instant"]["fallback_calls"], w["instant"]["fallback_calls"]) << w["layer"];
      EXPECT_EQ(r["instant"]["calibrations"], w["instant"]["calibrations"]) << w["layer"];
    }
    if (w.contains("calibration"))
      EXPECT_EQ(r["calibration"]["calibrations"], w["calibration"]["calibrations"]) << w["layer"];
  }
  EXPECT_EQ(resumed["layers"][0]["measured"]["backward_calls"].get<int64_t>(), 6 * 2) << "6 steps of 2 micro-batches";
}

// Images end to end: an image folder (train/ and test/, two classes told apart by colour and
// a bright corner, with noise) read, augmented by the background loader, and learnt by a
// narrow ResNet-18; eval and the data-wait figure in the metrics.
TEST(Trainer, ImageFolderWithResNet) {
  TempDir tmp("lb_trainer");
  const fs::path root = tmp.sub("images");
  testing::write_image_folder(root);
  const nlohmann::json j = testing::tiny_resnet_config(root.string(), 0);
  const TrainResult r = train(Config::from_json(j, "img.json"), quiet(tmp.sub("run")));
  EXPECT_EQ(r.steps, 24);
  EXPECT_GE(r.final_eval.value("eval_accuracy", 0.0), 0.9) << r.final_eval.dump();
  const auto lines = read_lines(tmp.sub("run") + "/metrics.jsonl");
  const auto first = nlohmann::json::parse(lines.at(0));
  EXPECT_EQ(first["train_examples"], 96);
  EXPECT_EQ(first["eval_examples"], 32);
  EXPECT_TRUE(nlohmann::json::parse(lines.at(1)).contains("data_wait_ms"));
}

INSTANTIATE_TEST_SUITE_P(Strategies, TrainerByStrategy, ::testing::Values("vanilla", "instant", "hot"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace lb::train
