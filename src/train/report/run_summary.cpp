// RunSummary (see run_summary.h).
#include "lb/train/report/run_summary.h"

#include <algorithm>
#include <utility>

#include "lb/io/json_file.h"
#include "lb/train/run/metrics_log.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// The probe lines' figures averaged per layer and over all layers; none when no compressed
// layer was probed.
std::optional<ProbeSummary> summarize_probes(const std::vector<nlohmann::json>& probes, double probe_ms,
                                             double train_s) {
  if (probes.empty()) return std::nullopt;
  const std::vector<std::pair<std::string, std::string>> figures = {
      {"local", "g_w"}, {"local", "g_x"}, {"end_to_end", "g_w"}, {"end_to_end", "g_x"}};
  std::map<std::string, std::map<std::string, std::vector<double>>> by_layer;
  std::map<std::string, std::vector<double>> all;
  for (const auto& p : probes)
    for (const auto& l : p.value("layers", nlohmann::json::array())) {
      auto& m = by_layer[l.value("layer", "")];
      for (const auto& [where, g] : figures)
        if (l.contains(where) && l[where].contains(g))
          for (const char* k : {"cos", "rel_err"}) {
            const std::string key = where + "_" + g + "_" + k;
            m[key].push_back(l[where][g].value(k, 0.0));
            all[key].push_back(l[where][g].value(k, 0.0));
          }
    }
  if (all.empty()) return std::nullopt;
  ProbeSummary s;
  s.probes = static_cast<int64_t>(probes.size());
  s.ms_total = probe_ms;
  s.share_of_training = train_s > 0 ? probe_ms / (train_s * 1000.0) : 0.0;
  for (const auto& [k, v] : all) s.mean[k] = mean_of(v);
  for (const auto& [name, m] : by_layer) {
    auto& layer = s.layers[name];  // a probed layer without figures too (report.json has it)
    for (const auto& [k, v] : m) layer[k] = mean_of(v);
  }
  return s;
}

// Task metrics only: not the evaluation's own timing and size (eval_runtime_s, eval_samples,
// eval_samples_per_second, eval_steps...).
bool task_metric(const std::string& key, const nlohmann::json& value) {
  return key.rfind("eval_", 0) == 0 && value.is_number() && key.rfind("eval_runtime", 0) != 0 &&
         key.rfind("eval_samples", 0) != 0 && key.rfind("eval_steps", 0) != 0;
}

}  // namespace

nlohmann::json ProbeSummary::to_json() const {
  return {{"probes", probes}, {"ms_total", ms_total}, {"share_of_training", share_of_training},
          {"mean", mean},     {"layers", layers}};
}

RunSummary RunSummary::read(const fs::path& run, int64_t seed) {
  const nlohmann::json results = io::read_json_file((run / "eval_results.json").string());
  RunSummary r;
  r.dir = run.string();
  r.seed = seed;
  std::vector<double> step_ms, fwd_ms, bwd_ms, saved, paper_flops, paper_saved, wait_ms;
  std::vector<nlohmann::json> probes;
  for (const auto& l : read_metrics((run / "metrics.jsonl").string())) {
    const std::string type = l.value("type", "");
    if (type == "train") {
      r.steps = l.value("step", r.steps);
      step_ms.push_back(l.value("step_ms", 0.0));
      fwd_ms.push_back(l.value("forward_ms", 0.0));
      bwd_ms.push_back(l.value("backward_ms", 0.0));
      wait_ms.push_back(l.value("data_wait_ms", 0.0));
      saved.push_back(l.value("saved_bytes", 0.0));
      paper_flops.push_back(l.value("paper_backward_mflops_per_example", 0.0));
      paper_saved.push_back(l.value("paper_saved_mib_fp32_per_example", 0.0));
      r.saved_bytes_peak = std::max(r.saved_bytes_peak, l.value("saved_bytes_max", 0.0));
      r.peak_bytes = std::max(r.peak_bytes, l.value("peak_bytes", 0.0));
      r.activation_peak_bytes = std::max(r.activation_peak_bytes, l.value("activation_peak_bytes", 0.0));
      if (l.contains("peak_bytes_by_tag"))
        for (auto it = l["peak_bytes_by_tag"].begin(); it != l["peak_bytes_by_tag"].end(); ++it)
          r.peak_bytes_by_tag[it.key()] = std::max(r.peak_bytes_by_tag[it.key()], it.value().get<double>());
    } else if (type == "calibration") {
      r.calibration_ms += l.value("ms", 0.0);
    } else if (type == "probe") {
      probes.push_back(l);
    }
  }
  r.step_ms = mean_of(step_ms);
  r.forward_ms = mean_of(fwd_ms);
  r.backward_ms = mean_of(bwd_ms);
  r.data_wait_ms = mean_of(wait_ms);
  r.saved_bytes_mean = mean_of(saved);
  r.paper_saved_mib_fp32_per_example = mean_of(paper_saved);
  r.paper_backward_mflops_per_example = mean_of(paper_flops);
  r.train_runtime_s = results.value("train_runtime_s", 0.0);
  r.examples_per_s = results.value("train_samples_per_second", 0.0);
  r.minutes_per_epoch = results.value("minutes_per_epoch", 0.0);
  r.primary_metric = results.value("primary_metric", "");
  const double total_ms = r.calibration_ms + r.train_runtime_s * 1000.0;
  r.calibration_share = total_ms > 0 ? r.calibration_ms / total_ms : 0.0;
  const nlohmann::json final_eval = results.value("final", nlohmann::json::object());
  for (auto it = final_eval.begin(); it != final_eval.end(); ++it)
    if (task_metric(it.key(), it.value())) r.metrics[it.key()] = it.value().get<double>();
  // (eval_results.json keeps each Strategy::report(); runs written before the generic keys
  // are read through the strategy keys by StrategySummary::from_json.)
  for (const auto& l : results.value("layers", nlohmann::json::array()))
    r.layers.push_back(nn::backward::StrategySummary::from_json(l));
  r.probe = summarize_probes(probes, results.value("grad_probe_ms_total", 0.0), r.train_runtime_s);
  return r;
}

nlohmann::json RunSummary::layers_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& sum : layers) {
    nlohmann::json l = {{"layer", sum.layer},
                        {"type", sum.type},
                        {"saved_bytes_last_call", sum.measured.saved_bytes_last_call},
                        {"backward_ms_total", sum.measured.backward_ms_total},
                        {"compressing", sum.compressing}};
    if (sum.fallback_reason) l["fallback_reason"] = *sum.fallback_reason;
    if (sum.ranks) {
      // The flat keys of earlier report.json files, and the generic "ranks".
      l["x_rank"] = sum.ranks->x.rank;
      l["x_axis"] = sum.ranks->x.axis;
      l["g_y_rank"] = sum.ranks->g_y.rank;
      l["g_y_axis"] = sum.ranks->g_y.axis;
      l["ranks"] = {{"x", sum.ranks->x.to_json()}, {"g_y", sum.ranks->g_y.to_json()}};
    }
    if (sum.quantizer) l["quantizer"] = *sum.quantizer;
    if (probe && probe->layers.count(sum.layer)) l["probe"] = probe->layers.at(sum.layer);
    out.push_back(std::move(l));
  }
  return out;
}

nlohmann::json RunSummary::to_json() const {
  return {{"seed", seed},
          {"dir", dir},
          {"metrics", metrics},
          {"steps", steps},
          {"train_runtime_s", train_runtime_s},
          {"examples_per_s", examples_per_s},
          {"minutes_per_epoch", minutes_per_epoch},
          {"step_ms", step_ms},
          {"forward_ms", forward_ms},
          {"backward_ms", backward_ms},
          {"data_wait_ms", data_wait_ms},
          {"saved_bytes_mean", saved_bytes_mean},
          {"saved_bytes_peak", saved_bytes_peak},
          {"activation_peak_bytes", activation_peak_bytes},
          {"paper_saved_mib_fp32_per_example", paper_saved_mib_fp32_per_example},
          {"paper_backward_mflops_per_example", paper_backward_mflops_per_example},
          {"peak_bytes", peak_bytes},
          {"peak_bytes_by_tag", peak_bytes_by_tag},
          {"calibration_ms", calibration_ms},
          {"calibration_share", calibration_share},
          {"probe", probe ? probe->to_json() : nlohmann::json(nullptr)},
          {"layers", layers_json()}};
}

}  // namespace lb::train
