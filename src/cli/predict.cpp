// `leanback predict CONFIG [--checkpoint DIR] --out DIR [--split S ...]`: a split's predictions
// as files (GLUE-server submission files for GLUE tasks, "index<TAB>prediction" otherwise);
// `leanback predict CONFIG [--checkpoint DIR] --text T [--text-pair P] ... | --input FILE`:
// texts as they are, one JSON line per text on stdout ({"index", "label", "score"} as a
// Hugging Face text-classification pipeline gives them; regression: {"index", "score"}).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include "lb/core/precision.h"
#include "lb/data/glue.h"
#include "lb/data/text_file.h"
#include "lb/io/atomic_file.h"
#include "lb/train/evaluate.h"
#include "lb/train/run/output_dir.h"
#include "src/cli/cli_parse.h"
#include "src/cli/eval_model.h"

namespace lb::cli {

namespace fs = std::filesystem;

namespace {

struct PredictFlags {
  std::string config_path, checkpoint, out_dir, input, device = "cpu";
  std::vector<std::string> sets, splits, texts, pairs;
  bool overwrite = false, allow_change = false;
};

// Whether the config's task reads sentence pairs.
bool takes_pairs(const train::Config& c) {
  if (train::is_own_text_task(c.data.task)) return c.data.text_columns.size() == 2;
  if (c.data.task == "synthetic" || !train::is_text_task(c)) return false;
  return data::glue_task(c.data.task).is_pair;
}

// --input FILE: .txt holds one text per line (a pair's two sentences separated by a tab);
// .csv / .tsv / .jsonl hold the text columns (the config's data.text_columns for a user's own
// task; "text" and, for pairs, "text_pair" otherwise, the pipeline's names).
train::RawTexts read_input(const std::string& path, const train::Config& c) {
  const bool pairs = takes_pairs(c);
  data::TextFile f;
  std::string ext = fs::path(path).extension().string();
  if (ext == ".txt" || ext == ".TXT") {
    f = data::read_text_lines(path, pairs);
  } else {
    data::TextColumns cols;
    if (train::is_own_text_task(c.data.task)) cols.text = c.data.text_columns;
    else cols.text = pairs ? std::vector<std::string>{"text", "text_pair"} : std::vector<std::string>{"text"};
    f = data::read_text_file(path, data::text_format_of_file(path), cols, false);
  }
  train::RawTexts raw;
  for (auto& r : f.rows) {
    raw.texts.push_back(std::move(r.texts[0]));
    if (r.texts.size() > 1) raw.pairs.push_back(std::move(r.texts[1]));
  }
  return raw;
}

// The probability softmax gives the largest logit.
double top_probability(const std::vector<float>& logits) {
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float z : logits) sum += std::exp(static_cast<double>(z - top));
  return 1.0 / sum;
}

int predict_texts(const PredictFlags& f, const train::Config& probe) {
  LB_CHECK(f.out_dir.empty() && f.splits.empty(), "--text / --input print their predictions on stdout: they take "
           "no --out or --split");
  LB_CHECK(f.texts.empty() || f.input.empty(), "--text and --input: give one or the other");
  train::RawTexts raw;
  if (!f.input.empty()) raw = read_input(f.input, probe);
  else raw = {f.texts, f.pairs};
  train::TaskDataOptions o;
  o.texts = &raw;
  Loaded l = load_for_eval(f.config_path, f.sets, f.checkpoint, o, parse_device_flag(f.device), true, f.allow_change);
  auto loader = train::make_loader(l.data, l.config, false, l.config.train.seed);
  const MatmulPrecisionScope precision(matmul_precision_from_name(l.config.train.precision));
  train::PhaseProgress progress("predict", ::isatty(2) != 0, false);
  const train::EvalOutput ev = train::evaluate(*l.model, *loader, l.data, /*keep_logits=*/true, &progress);
  const std::vector<std::string>& names = l.data.glue ? l.data.glue->class_names : l.data.label_names;
  std::vector<std::string> lines(ev.positions.size());
  for (size_t i = 0; i < ev.positions.size(); ++i) {
    const auto pos = static_cast<size_t>(ev.positions[i]);
    nlohmann::json j = {{"index", pos}};
    if (l.data.regression) {
      j["score"] = ev.predictions[i];
    } else {
      const auto c = static_cast<size_t>(ev.predictions[i]);
      j["label"] = c < names.size() ? names[c] : "LABEL_" + std::to_string(c);  // Hugging Face's unnamed label
      j["score"] = top_probability(ev.logits[i]);
    }
    lines.at(pos) = j.dump();
  }
  for (const auto& line : lines) std::cout << line << "\n";
  return 0;
}

// A test split's rows as "index<TAB>prediction" (class names, or regression values).
std::string prediction_table(const train::TaskData& d, const train::EvalOutput& ev) {
  std::string text = "index\tprediction\n";
  char buf[64];
  for (size_t i = 0; i < ev.predictions.size(); ++i) {
    text += std::to_string(d.eval_text ? d.eval_text->indices[ev.positions[i]] : ev.positions[i]) + "\t";
    if (d.regression) {
      std::snprintf(buf, sizeof buf, "%.6g", ev.predictions[i]);
      text += buf;
    } else {
      const auto c = static_cast<size_t>(ev.predictions[i]);
      text += c < d.label_names.size() ? d.label_names[c] : std::to_string(c);
    }
    text += "\n";
  }
  return text;
}

int predict_splits(PredictFlags f, const train::Config& probe) {
  LB_CHECK(!f.out_dir.empty(), "--out: required (the folder for the prediction files), unless --text or --input "
           "gives the texts");
  if (f.splits.empty()) {
    if (probe.data.task == "synthetic") f.splits = {"dev"};
    else if (!train::is_text_task(probe) || train::is_own_text_task(probe.data.task)) f.splits = {"test"};
    else f.splits = data::glue_task(probe.data.task).test_splits;
  }
  train::refuse_protected_dir(f.out_dir, "--out");
  // Created once the model is built and checked: a refused predict leaves nothing behind.
  bool create_out = train::output_dir_fresh(f.out_dir, "--out");
  if (probe.data.max_eval_examples > 0)
    std::cerr << "predict: data.max_eval_examples (" << probe.data.max_eval_examples
              << ") does not apply: a submission holds every row of the split\n";
  for (const auto& split : f.splits) {
    train::TaskDataOptions o;
    o.eval_split = split;
    Loaded l = load_for_eval(f.config_path, f.sets, f.checkpoint, o, parse_device_flag(f.device), true, f.allow_change);
    const fs::path file = fs::path(f.out_dir) / (l.data.glue ? l.data.glue->submission_file(split)
                                                              : split + "_predictions.tsv");
    refuse_replacing(file, f.out_dir, f.overwrite);  // before the work
    if (create_out) train::create_output_dir(f.out_dir, train::OutputKind::Predict, "--out");
    create_out = false;
    train::record_written(f.out_dir, {file.filename().string()});
    auto loader = train::make_loader(l.data, l.config, false, l.config.train.seed);
    const MatmulPrecisionScope precision(matmul_precision_from_name(l.config.train.precision));
    train::PhaseProgress progress("predict " + split, ::isatty(2) != 0, false);
    const train::EvalOutput ev = train::evaluate(*l.model, *loader, l.data, /*keep_logits=*/false, &progress);
    if (l.data.glue) {
      std::vector<int64_t> idx;
      for (int64_t pos : ev.positions) idx.push_back(l.data.eval_text->indices[pos]);
      data::write_glue_submission(*l.data.glue, split, idx, ev.predictions, f.out_dir);
    } else {
      io::write_text_atomic(file.string(), prediction_table(l.data, ev));
    }
    std::cerr << "wrote " << file.string() << " (" << ev.predictions.size() << " rows)\n";
  }
  return 0;
}

}  // namespace

int cmd_predict(const std::vector<std::string>& args) {
  CLI::App app{"Predict a split's rows into files (GLUE-server submission files for GLUE tasks), or the texts "
               "--text / --input give as JSON lines on stdout.",
               "leanback predict"};
  PredictFlags f;
  int threads = 0;
  app.add_option("config", f.config_path, "the run's JSON config")->required();
  app.add_option("--checkpoint", f.checkpoint, kCheckpointHelp);
  app.add_option("--out", f.out_dir, "folder for the prediction files (a split's predictions)");
  app.add_option("--split", f.splits, "split(s) to predict (default: the task's test splits)")
      ->allow_extra_args(false);
  app.add_option("--text", f.texts, "a text to predict (repeatable); printed as a JSON line")->allow_extra_args(false);
  app.add_option("--text-pair", f.pairs, "the second sentence of the --text at the same position (pair tasks)")
      ->allow_extra_args(false);
  app.add_option("--input", f.input,
                 "a file of texts to predict: .txt (one per line; a tab between a pair's sentences), or .csv / "
                 ".tsv / .jsonl with the text columns");
  app.add_option("--set", f.sets, "override a config key (repeatable)")->allow_extra_args(false);
  add_device_option(app, f.device);
  add_threads_option(app, threads);
  app.add_flag("--overwrite", f.overwrite, "replace existing prediction files");
  app.add_flag("--allow-config-change", f.allow_change, kAllowConfigChangeHelp);
  if (!parse_cli(app, args)) return 0;
  apply_threads_flag(threads);
  const train::Config probe = train::load_config(f.config_path, f.sets);
  if (!f.texts.empty() || !f.pairs.empty() || !f.input.empty()) return predict_texts(f, probe);
  return predict_splits(f, probe);
}

}  // namespace lb::cli
