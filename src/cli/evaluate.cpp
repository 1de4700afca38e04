// `leanback eval CONFIG [--checkpoint DIR] [--split S] [--predictions FILE.jsonl]`: a trained
// checkpoint (or the fine-tuned weights model.pretrained gives) on a split — its metrics
// (labeled splits) and per-example predictions.
#include <iostream>

#include <unistd.h>

#include "lb/core/precision.h"
#include "lb/io/atomic_file.h"
#include "lb/train/evaluate.h"
#include "src/cli/cli_parse.h"
#include "src/cli/eval_model.h"

namespace lb::cli {

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
  train::TaskDataOptions o;
  o.eval_split = split;
  Loaded l = load_for_eval(config_path, sets, checkpoint, o, parse_device_flag(device), false, allow_change);
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

}  // namespace lb::cli
