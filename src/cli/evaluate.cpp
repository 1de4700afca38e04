// `leanback eval CONFIG [--checkpoint DIR] [--split S] [--predictions FILE.jsonl]` and
// `leanback predict CONFIG [--checkpoint DIR] --out DIR`: a trained checkpoint (or the
// fine-tuned weights model.pretrained gives) on a split — metrics (labeled splits),
// per-example predictions, or GLUE-server submission files.
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "lb/core/precision.h"
#include "lb/io/atomic_file.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/evaluate.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/trainer.h"
#include "src/cli/cli_parse.h"

namespace lb::cli {

namespace fs = std::filesystem;

namespace {

struct Loaded {
  train::Config config;
  train::TaskData data;
  std::unique_ptr<train::TaskModel> model;
};

const char* kCheckpointHelp =
    "a checkpoint, or a run directory (its latest); without it, the weights model.pretrained gives (a fine-tuned "
    "Hugging Face directory, a PEFT adapter)";
constexpr const char* kAllowConfigChangeHelp =
    "evaluate even where the config's model or lora settings differ from those the checkpoint trained with "
    "(a warning names them)";

// The checkpoint's recorded config against the one evaluating it: a setting that changes the
// maths (lora.alpha, model.hidden_act, ...) would give other results from the same weights.
void check_against_checkpoint(const train::Config& c, const std::string& config_path, const std::string& ckpt,
                              const train::LoadedCheckpoint& loaded, bool allow) {
  if (!loaded.state.contains("extra") || !loaded.state["extra"].contains("config")) return;
  const std::vector<std::string> diff = train::maths_differences(c, loaded.state["extra"]["config"]);
  if (diff.empty()) return;
  std::string list;
  for (const auto& d : diff) list += "\n  " + d;
  if (!allow)
    throw Error(config_path + ": the model it builds differs from the one checkpoint " + ckpt + " trained, in:" +
                list + "\nevaluate with the config it trained with (its run directory's config.json), or pass "
                "--allow-config-change");
  std::cerr << "warning: --allow-config-change: the model differs from the one checkpoint " << ckpt
            << " trained, in:" << list << "\n";
}

Loaded load(const std::string& config_path, const std::vector<std::string>& sets,
            const std::string& checkpoint, const std::string& split, Device device, bool every_row = false,
            bool allow_config_change = false) {
  Loaded l{train::load_config(config_path, sets), {}, nullptr};
  if (every_row) l.config.data.max_eval_examples = 0;  // a submission holds every test row
  train::TaskDataOptions o;
  o.train = false;
  o.eval_split = split;
  l.data = train::load_task_data(l.config, o);
  l.model = train::build_task_model(l.config, l.data.num_labels, l.data.vocab_size);
  if (checkpoint.empty()) {
    // The weights model.pretrained gives (a fine-tuned Hugging Face directory, a PEFT
    // adapter), where they leave nothing at random.
    const train::ModelSection& m = l.config.model;
    LB_CHECK(!m.pretrained.empty(), config_path, ": --checkpoint: required, as model.pretrained is not set "
             "(without either the model is untrained)");
    const auto& fresh = l.model->fresh_parameters();
    LB_CHECK(fresh.empty(), config_path, ": --checkpoint: required, as ", m.pretrained_as_given(),
             " has no trained ", fresh.front(), fresh.size() > 1 ? " (and " + std::to_string(fresh.size() - 1) +
             " more)" : std::string(), ", which would start at random: a pretrained encoder needs a fine-tuned "
             "checkpoint, or a directory exported from one");
  } else {
    const std::string ckpt = train::find_checkpoint(checkpoint, "--checkpoint");
    const train::LoadedCheckpoint loaded = train::load_checkpoint(ckpt, l.model->module(), nullptr);
    check_against_checkpoint(l.config, config_path, ckpt, loaded, allow_config_change);
  }
  l.model->to(device);
  return l;
}

// What the weights came from, for the printed result.
nlohmann::json weights_source(const train::Config& c, const std::string& checkpoint) {
  if (!checkpoint.empty()) return {{"checkpoint", train::find_checkpoint(checkpoint, "--checkpoint")}};
  return {{"checkpoint", nullptr}, {"pretrained", c.model.pretrained_as_given()}};
}

void refuse_existing(const fs::path& p, bool overwrite) {
  if (!overwrite && fs::exists(p))
    throw Error(p.string() + " already exists; pass --overwrite to replace it");
}

// predict --out: a directory leanback creates (and marks) for its submission files, or an
// existing one it only adds files to; files there are replaced only with --overwrite and only
// in a directory leanback created for predictions (output_dir.h).
void refuse_replacing(const fs::path& file, const fs::path& dir, bool overwrite) {
  if (!fs::exists(fs::symlink_status(file))) return;
  refuse_existing(file, overwrite);
  if (train::output_marker(dir) != train::OutputKind::Predict)
    throw train::OutputRefused("--overwrite refused: " + file.string() + " is in " + dir.string() +
                               ", which leanback did not create for predictions (no " + train::kOutputMarker +
                               " marker), so it may be a file of yours; pass --out DIR for a new directory");
  if (!train::was_written(dir, file.filename().string()))
    throw train::OutputRefused("--overwrite refused: " + file.string() + " is not a file leanback wrote there (its " +
                               train::kOutputMarker + " does not record it), so it may be yours; pass --out DIR "
                               "for a new directory");
}

}  // namespace

int cmd_eval(const std::vector<std::string>& args) {
  CLI::App app{"Evaluate a checkpoint on a labeled split: prints the metrics as JSON.", "leanback eval"};
  std::string config_path, checkpoint, split, predictions, device = "cpu";
  int threads = 0;
  std::vector<std::string> sets;
  bool overwrite = false;
  app.add_option("config", config_path, "the run's JSON config")->required();
  app.add_option("--checkpoint", checkpoint, kCheckpointHelp);
  app.add_option("--split", split, "dev (default: the task's first dev split), dev_matched, test, ...");
  app.add_option("--predictions", predictions, "write per-example index, gold, prediction, logits (JSON lines)");
  app.add_option("--set", sets, "override a config key (repeatable)")->allow_extra_args(false);
  add_device_option(app, device);
  add_threads_option(app, threads);
  app.add_flag("--overwrite", overwrite, "replace an existing predictions file");
  bool allow_change = false;
  app.add_flag("--allow-config-change", allow_change, kAllowConfigChangeHelp);
  if (!parse_cli(app, args)) return 0;
  apply_threads_flag(threads);
  if (!predictions.empty()) refuse_existing(predictions, overwrite);
  Loaded l = load(config_path, sets, checkpoint, split, parse_device_flag(device), false, allow_change);
  if (!l.data.eval_labeled() && predictions.empty())
    throw Error("split '" + l.data.eval_split + "' of task " + l.data.task +
                " has no labels to evaluate against; use `leanback predict`, or --predictions FILE");
  auto loader = train::make_loader(l.data, l.config, false, l.config.train.seed);
  const MatmulPrecisionScope precision(matmul_precision_from_name(l.config.train.precision));
  train::PhaseProgress progress("evaluation of " + l.data.eval_split, ::isatty(2) != 0, false);
  const train::EvalOutput ev = train::evaluate(*l.model, *loader, l.data, !predictions.empty(), &progress);
  if (!predictions.empty()) {
    std::string text;
    const auto& ds = l.data.text ? l.data.eval_text->indices : std::vector<int64_t>{};
    for (size_t i = 0; i < ev.predictions.size(); ++i) {
      const int64_t pos = ev.positions[i];
      nlohmann::json j = {{"index", ds.empty() ? pos : ds[pos]},
                          {"prediction", ev.predictions[i]},
                          {"logits", ev.logits[i]}};
      if (!ev.gold.empty()) j["gold"] = ev.gold[i];
      if (!l.data.regression && !l.data.label_names.empty())
        j["prediction_label"] = l.data.label_names.at(static_cast<size_t>(ev.predictions[i]));
      text += j.dump() + "\n";
    }
    io::write_text_atomic(predictions, text);
    std::cerr << "wrote " << ev.predictions.size() << " predictions to " << predictions << "\n";
  }
  nlohmann::json out = ev.metrics;
  out["split"] = l.data.eval_split;
  out.update(weights_source(l.config, checkpoint));
  std::cout << out.dump() << "\n";
  return 0;
}

int cmd_predict(const std::vector<std::string>& args) {
  CLI::App app{"Predict the test split(s) and write GLUE-server submission files.", "leanback predict"};
  std::string config_path, checkpoint, out_dir, device = "cpu";
  int threads = 0;
  std::vector<std::string> sets, splits;
  bool overwrite = false;
  app.add_option("config", config_path, "the run's JSON config")->required();
  app.add_option("--checkpoint", checkpoint, kCheckpointHelp);
  app.add_option("--out", out_dir, "folder for the submission files")->required();
  app.add_option("--split", splits, "split(s) to predict (default: the task's test splits)")
      ->allow_extra_args(false);
  app.add_option("--set", sets, "override a config key (repeatable)")->allow_extra_args(false);
  add_device_option(app, device);
  add_threads_option(app, threads);
  app.add_flag("--overwrite", overwrite, "replace existing submission files");
  bool allow_change = false;
  app.add_flag("--allow-config-change", allow_change, kAllowConfigChangeHelp);
  if (!parse_cli(app, args)) return 0;
  apply_threads_flag(threads);
  const train::Config probe = train::load_config(config_path, sets);
  if (splits.empty()) {
    if (probe.data.task == "synthetic" || probe.data.task == "cifar10" ||
        probe.data.task == "cifar100" || probe.data.task == "image_folder")
      splits = {probe.data.task == "synthetic" ? "dev" : "test"};
    else
      splits = data::glue_task(probe.data.task).test_splits;
  }
  train::refuse_protected_dir(out_dir, "--out");
  // Created once the model is built and checked: a refused predict leaves nothing behind.
  bool create_out = train::output_dir_fresh(out_dir, "--out");
  if (probe.data.max_eval_examples > 0)
    std::cerr << "predict: data.max_eval_examples (" << probe.data.max_eval_examples
              << ") does not apply: a submission holds every row of the split\n";
  for (const auto& split : splits) {
    Loaded l =
        load(config_path, sets, checkpoint, split, parse_device_flag(device), /*every_row=*/true, allow_change);
    const fs::path file = fs::path(out_dir) / (l.data.glue ? l.data.glue->submission_file(split)
                                                            : split + "_predictions.tsv");
    refuse_replacing(file, out_dir, overwrite);  // before the work
    if (create_out) train::create_output_dir(out_dir, train::OutputKind::Predict, "--out");
    create_out = false;
    train::record_written(out_dir, {file.filename().string()});
    auto loader = train::make_loader(l.data, l.config, false, l.config.train.seed);
    const MatmulPrecisionScope precision(matmul_precision_from_name(l.config.train.precision));
    train::PhaseProgress progress("predict " + split, ::isatty(2) != 0, false);
    const train::EvalOutput ev = train::evaluate(*l.model, *loader, l.data, /*keep_logits=*/false, &progress);
    if (l.data.glue) {
      std::vector<int64_t> idx;
      for (int64_t pos : ev.positions) idx.push_back(l.data.eval_text->indices[pos]);
      data::write_glue_submission(*l.data.glue, split, idx, ev.predictions, out_dir);
    } else {
      std::string text = "index\tprediction\n";
      for (size_t i = 0; i < ev.predictions.size(); ++i) {
        const auto c = static_cast<size_t>(ev.predictions[i]);
        text += std::to_string(ev.positions[i]) + "\t" +
                (c < l.data.label_names.size() ? l.data.label_names[c] : std::to_string(c)) + "\n";
      }
      io::write_text_atomic(file.string(), text);
    }
    std::cerr << "wrote " << file.string() << " (" << ev.predictions.size() << " rows)\n";
  }
  return 0;
}

}  // namespace lb::cli
