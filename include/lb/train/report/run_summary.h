// One finished run directory as `compare` reads it, typed: its final metrics, costs, the
// gradient-fidelity probe and each layer's strategy summary, from the files train() wrote
// (eval_results.json, metrics.jsonl; lb/train/trainer.h). report.json's run entries are its
// to_json().
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/nn/backward/summary.h"

namespace lb::train {

// The gradient-fidelity probe lines of a run (train.grad_probe_every): per layer and over all
// layers, the mean over probes of each closeness figure ("local_g_w_cos", "end_to_end_g_x_rel_err",
// ...), and the probe's cost.
struct ProbeSummary {
  int64_t probes = 0;
  double ms_total = 0;
  double share_of_training = 0;  // ms_total over the training time
  std::map<std::string, double> mean;
  std::map<std::string, std::map<std::string, double>> layers;
  nlohmann::json to_json() const;
};

struct RunSummary {
  std::string dir;
  int64_t seed = 0;
  std::map<std::string, double> metrics;  // the final evaluation's task metrics (eval_*)
  std::string primary_metric;             // "eval_accuracy", ...
  int64_t steps = 0;                      // of the last logged training line
  double train_runtime_s = 0, examples_per_s = 0, minutes_per_epoch = 0;
  // Means over the logged training lines.
  double step_ms = 0, forward_ms = 0, backward_ms = 0, data_wait_ms = 0;
  double saved_bytes_mean = 0;
  double paper_saved_mib_fp32_per_example = 0, paper_backward_mflops_per_example = 0;
  // Maxima over them.
  double saved_bytes_peak = 0, activation_peak_bytes = 0, peak_bytes = 0;
  std::map<std::string, double> peak_bytes_by_tag;
  double calibration_ms = 0;
  double calibration_share = 0;  // of calibration + training time
  std::optional<ProbeSummary> probe;  // none without probes of a compressed layer
  std::vector<nn::backward::StrategySummary> layers;

  // Reads `run` (a finished run: eval_results.json exists); errors name the file.
  static RunSummary read(const std::filesystem::path& run, int64_t seed);
  nlohmann::json to_json() const;
  // The per-layer entries of to_json() (with each layer's probe figures).
  nlohmann::json layers_json() const;
};

}  // namespace lb::train
