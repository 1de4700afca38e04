// compare / build_report / report_table / report_markdown (see compare.h).
#include "lb/train/report/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/nn/backward/policy.h"
#include "lb/nn/backward/summary.h"
#include "lb/train/run/metrics_log.h"
#include "lb/train/run/output_dir.h"
#include "lb/train/report/plots.h"
#include "lb/train/trainer.h"

namespace lb::train {

namespace fs = std::filesystem;

namespace {

nlohmann::json read_json_file(const fs::path& p) { return io::read_json_file(p.string()); }

// Written into a run directory whose training diverged (non-finite loss or gradient).
constexpr const char* kFailedFile = "compare_failed.txt";

fs::path run_dir_of(const fs::path& dir, const std::string& strategy, int64_t seed) {
  return dir / strategy / ("seed-" + std::to_string(seed));
}

bool has_checkpoint(const fs::path& run) {
  if (!fs::is_directory(run)) return false;
  for (const auto& e : fs::directory_iterator(run))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0 &&
        fs::exists(e.path() / "trainer_state.json"))
      return true;
  return false;
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Sample standard deviation (n - 1), 0 for one value: what mean ± std over seeds reports.
double std_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// The gradient-fidelity probe lines of a run: per layer and over all layers, the mean over
// probes of each closeness figure (cosine similarity, relative error), and the probe's cost.
nlohmann::json summarize_probes(const std::vector<nlohmann::json>& probes, double probe_ms, double train_s) {
  if (probes.empty()) return nullptr;
  const std::vector<std::pair<std::string, std::string>> figures = {
      {"local", "g_w"}, {"local", "g_x"}, {"end_to_end", "g_w"}, {"end_to_end", "g_x"}};
  std::map<std::string, std::map<std::string, std::vector<double>>> by_layer;
  std::map<std::string, std::vector<double>> all;
  std::vector<std::string> order;
  for (const auto& p : probes)
    for (const auto& l : p.value("layers", nlohmann::json::array())) {
      const std::string name = l.value("layer", "");
      if (!by_layer.count(name)) order.push_back(name);
      auto& m = by_layer[name];
      for (const auto& [where, g] : figures)
        if (l.contains(where) && l[where].contains(g))
          for (const char* k : {"cos", "rel_err"}) {
            const std::string key = where + "_" + g + "_" + k;
            m[key].push_back(l[where][g].value(k, 0.0));
            all[key].push_back(l[where][g].value(k, 0.0));
          }
    }
  nlohmann::json layers = nlohmann::json::object();
  for (const auto& name : order) {
    nlohmann::json l = nlohmann::json::object();
    for (const auto& [k, v] : by_layer[name]) l[k] = mean_of(v);
    layers[name] = l;
  }
  if (all.empty()) return nullptr;  // nothing compressed was probed
  nlohmann::json mean = nlohmann::json::object();
  for (const auto& [k, v] : all) mean[k] = mean_of(v);
  return {{"probes", probes.size()},
          {"ms_total", probe_ms},
          {"share_of_training", train_s > 0 ? probe_ms / (train_s * 1000.0) : 0.0},
          {"mean", mean},
          {"layers", layers}};
}

// One finished run: its metrics, costs and per-layer choices.
nlohmann::json summarize_run(const fs::path& run, int64_t seed) {
  const nlohmann::json results = read_json_file(run / "eval_results.json");
  const auto lines = read_metrics((run / "metrics.jsonl").string());
  std::vector<double> step_ms, fwd_ms, bwd_ms, saved, paper_flops, paper_saved, wait_ms;
  double saved_peak = 0, peak_bytes = 0, calib_ms = 0, activation_peak = 0;
  int64_t last_step = 0;
  std::vector<nlohmann::json> probes;
  nlohmann::json peak_by_tag = nlohmann::json::object();
  for (const auto& l : lines) {
    const std::string type = l.value("type", "");
    if (type == "train") {
      last_step = l.value("step", last_step);
      step_ms.push_back(l.value("step_ms", 0.0));
      fwd_ms.push_back(l.value("forward_ms", 0.0));
      bwd_ms.push_back(l.value("backward_ms", 0.0));
      wait_ms.push_back(l.value("data_wait_ms", 0.0));
      saved.push_back(l.value("saved_bytes", 0.0));
      paper_flops.push_back(l.value("paper_backward_mflops_per_example", 0.0));
      paper_saved.push_back(l.value("paper_saved_mib_fp32_per_example", 0.0));
      saved_peak = std::max(saved_peak, l.value("saved_bytes_max", 0.0));
      peak_bytes = std::max(peak_bytes, l.value("peak_bytes", 0.0));
      activation_peak = std::max(activation_peak, l.value("activation_peak_bytes", 0.0));
      if (l.contains("peak_bytes_by_tag"))
        for (auto it = l["peak_bytes_by_tag"].begin(); it != l["peak_bytes_by_tag"].end(); ++it)
          peak_by_tag[it.key()] = std::max(peak_by_tag.value(it.key(), 0.0), it.value().get<double>());
    } else if (type == "calibration") {
      calib_ms += l.value("ms", 0.0);
    } else if (type == "probe") {
      probes.push_back(l);
    }
  }
  const double train_s = results.value("train_runtime_s", 0.0);
  nlohmann::json metrics = nlohmann::json::object();
  for (auto it = results["final"].begin(); it != results["final"].end(); ++it)
    // Task metrics only: not the evaluation's own timing and size (eval_runtime_s,
    // eval_samples, eval_samples_per_second).
    if (it.key().rfind("eval_", 0) == 0 && it.value().is_number() && it.key().rfind("eval_runtime", 0) != 0 &&
        it.key().rfind("eval_samples", 0) != 0 && it.key().rfind("eval_steps", 0) != 0)
      metrics[it.key()] = it.value();
  // Per layer: the strategy, what it kept at its last call and the choices it made.
  nlohmann::json layers = nlohmann::json::array();
  // (eval_results.json keeps each Strategy::report(); runs written before the generic keys
  // are read through the strategy keys by StrategySummary::from_json.)
  for (const auto& r : results.value("layers", nlohmann::json::array())) {
    const nn::backward::StrategySummary sum = nn::backward::StrategySummary::from_json(r);
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
    layers.push_back(std::move(l));
  }
  const nlohmann::json probe = summarize_probes(probes, results.value("grad_probe_ms_total", 0.0), train_s);
  if (!probe.is_null())
    for (auto& l : layers)
      if (probe["layers"].contains(l["layer"].get<std::string>())) l["probe"] = probe["layers"][l["layer"].get<std::string>()];
  return {{"seed", seed},
          {"dir", run.string()},
          {"metrics", metrics},
          {"steps", last_step},
          {"train_runtime_s", train_s},
          {"examples_per_s", results.value("train_samples_per_second", 0.0)},
          {"minutes_per_epoch", results.value("minutes_per_epoch", 0.0)},
          {"step_ms", mean_of(step_ms)},
          {"forward_ms", mean_of(fwd_ms)},
          {"backward_ms", mean_of(bwd_ms)},
          {"data_wait_ms", mean_of(wait_ms)},
          {"saved_bytes_mean", mean_of(saved)},
          {"saved_bytes_peak", saved_peak},
          {"activation_peak_bytes", activation_peak},
          {"paper_saved_mib_fp32_per_example", mean_of(paper_saved)},
          {"paper_backward_mflops_per_example", mean_of(paper_flops)},
          {"peak_bytes", peak_bytes},
          {"peak_bytes_by_tag", peak_by_tag},
          {"calibration_ms", calib_ms},
          {"calibration_share", calib_ms + train_s * 1000.0 > 0 ? calib_ms / (calib_ms + train_s * 1000.0) : 0.0},
          {"probe", probe},
          {"layers", layers}};
}

// Mean and std over the runs of one number field.
nlohmann::json over_runs(const nlohmann::json& runs, const std::string& key) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.value(key, 0.0));
  return {{"mean", mean_of(v)}, {"std", std_of(v)}};
}

std::string fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

std::string mib(double bytes) { return fixed(bytes / (1024.0 * 1024.0), 1); }

// Rows of the comparison: strategy, metric, Δ, costs.
std::vector<std::vector<std::string>> table_rows(const nlohmann::json& report) {
  const std::string metric = report.value("primary_metric", "");
  std::vector<std::vector<std::string>> rows = {
      {"strategy", "seeds", metric + " (x100)", "vs " + report.value("baseline", std::string("-")),
       "step ms", "bwd ms", "ex/s", "saved MiB mean/peak", "act peak MiB", "paper saved KiB/ex", "paper bwd MFLOP/ex",
       "calib %"}};
  bool probes = false;
  for (const auto& s : report["strategies"]) probes = probes || s.contains("probe");
  if (probes) rows[0].push_back("probe cos g_w/g_x");
  for (const auto& s : report["strategies"]) {
    std::vector<std::string> r;
    r.push_back(s["strategy"]);
    const size_t n_failed = s.contains("failed") ? s["failed"].size() : 0;
    r.push_back(std::to_string(s["runs"].size()) +
                (s.value("missing", 0) > 0 ? " (+" + std::to_string(s.value("missing", 0)) + " missing)" : "") +
                (n_failed > 0 ? " (+" + std::to_string(n_failed) + " diverged)" : ""));
    if (s["runs"].empty()) {
      rows.push_back(r);
      continue;
    }
    const auto& m = s["metrics"][metric];
    r.push_back(fixed(100 * m["mean"].get<double>(), 2) + " ± " + fixed(100 * m["std"].get<double>(), 2));
    r.push_back(s.contains("metric_diff") ? (s["metric_diff"].get<double>() >= 0 ? "+" : "") +
                                                fixed(100 * s["metric_diff"].get<double>(), 2)
                                          : "-");
    r.push_back(fixed(s["step_ms"]["mean"], 1));
    r.push_back(fixed(s["backward_ms"]["mean"], 1));
    r.push_back(fixed(s["examples_per_s"]["mean"], 1));
    r.push_back(mib(s["saved_bytes_mean"]["mean"]) + " / " + mib(s["saved_bytes_peak"]["mean"]));
    r.push_back(mib(s["activation_peak_bytes"]["mean"]));
    r.push_back(fixed(s["paper_saved_mib_fp32_per_example"]["mean"].get<double>() * 1024.0, 1));
    r.push_back(fixed(s["paper_backward_mflops_per_example"]["mean"], 1));
    r.push_back(fixed(100 * s["calibration_share"]["mean"].get<double>(), 1));
    if (probes)
      r.push_back(s.contains("probe") ? fixed(s["probe"]["mean"].value("local_g_w_cos", 0.0), 3) + " / " +
                                            fixed(s["probe"]["mean"].value("local_g_x_cos", 0.0), 3)
                                      : "-");
    rows.push_back(r);
  }
  return rows;
}


// The backward section of a config's JSON as a run uses it (Policy::resolved_json: a setting
// written out at its default equals one left out); as written when it does not parse.
nlohmann::json resolved_backward(const nlohmann::json& c) {
  const auto bw = c.find("backward");
  if (bw == c.end()) return nn::backward::Policy().resolved_json();
  try {
    return nn::backward::Policy::from_json(*bw, "backward").resolved_json();
  } catch (const Error&) {
    return *bw;
  }
}

// A run trained with --strategy S reads backward.strategies.S and nothing else of that map
// (Policy uses the map only for the override), so a config that differs from a directory's
// only there leaves the other strategies' runs valid. Compared as typed settings (resolved).
// Returns the strategy names whose settings differ, or nullopt when anything else differs.
std::optional<std::set<std::string>> changed_strategy_settings(const nlohmann::json& a, const nlohmann::json& b) {
  auto settings = [](const nlohmann::json& c) {
    const nlohmann::json bw = resolved_backward(c);
    return bw.is_object() && bw.contains("strategies") ? bw["strategies"] : nlohmann::json::object();
  };
  auto rest = [](nlohmann::json c) {
    c["backward"] = resolved_backward(c);
    if (c["backward"].is_object()) c["backward"].erase("strategies");
    return c;
  };
  if (rest(a) != rest(b)) return std::nullopt;
  const nlohmann::json sa = settings(a), sb = settings(b);
  if (!sa.is_object() || !sb.is_object()) return std::nullopt;
  std::set<std::string> changed;
  for (const auto* m : {&sa, &sb})
    for (auto it = m->begin(); it != m->end(); ++it)
      if (sa.value(it.key(), nlohmann::json()) != sb.value(it.key(), nlohmann::json())) changed.insert(it.key());
  return changed;
}
}  // namespace

nlohmann::json build_report(const std::string& compare_dir) {
  const fs::path dir(compare_dir);
  const nlohmann::json cmp = read_json_file(dir / "compare.json");
  LB_CHECK(cmp.is_object() && cmp.contains("strategies") && cmp.contains("seeds"),
           (dir / "compare.json").string(), ": not a compare file (needs strategies and seeds)");
  nlohmann::json strategies = nlohmann::json::array();
  std::string primary;
  for (const auto& sj : cmp["strategies"]) {
    const std::string s = sj.get<std::string>();
    nlohmann::json runs = nlohmann::json::array(), failed = nlohmann::json::array();
    int missing = 0;
    for (const auto& seed : cmp["seeds"]) {
      const fs::path run = run_dir_of(dir, s, seed.get<int64_t>());
      if (fs::exists(run / kFailedFile)) {
        std::ifstream in(run / kFailedFile);
        std::string message;
        std::getline(in, message);
        failed.push_back({{"seed", seed}, {"dir", run.string()}, {"error", message}});
        continue;
      }
      if (!fs::exists(run / "eval_results.json")) {
        ++missing;
        continue;
      }
      if (primary.empty()) primary = read_json_file(run / "eval_results.json").value("primary_metric", "");
      runs.push_back(summarize_run(run, seed.get<int64_t>()));
    }
    nlohmann::json e = {{"strategy", s}, {"runs", runs}, {"missing", missing}, {"failed", failed}};
    if (!runs.empty()) {
      nlohmann::json metrics = nlohmann::json::object();
      for (auto it = runs[0]["metrics"].begin(); it != runs[0]["metrics"].end(); ++it) {
        std::vector<double> v;
        for (const auto& r : runs) v.push_back(r["metrics"].value(it.key(), 0.0));
        metrics[it.key()] = {{"mean", mean_of(v)}, {"std", std_of(v)}, {"values", v}};
      }
      e["metrics"] = metrics;
      for (const char* k : {"step_ms", "forward_ms", "backward_ms", "data_wait_ms", "examples_per_s",
                            "saved_bytes_mean", "saved_bytes_peak", "activation_peak_bytes",
                            "paper_saved_mib_fp32_per_example",
                            "paper_backward_mflops_per_example", "peak_bytes", "calibration_share",
                            "calibration_ms", "train_runtime_s", "minutes_per_epoch"})
        e[k] = over_runs(runs, k);
      nlohmann::json by_tag = nlohmann::json::object();
      for (const auto& r : runs)
        for (auto it = r["peak_bytes_by_tag"].begin(); it != r["peak_bytes_by_tag"].end(); ++it)
          by_tag[it.key()] = std::max(by_tag.value(it.key(), 0.0), it.value().get<double>());
      e["peak_bytes_by_tag"] = by_tag;
      e["layers"] = runs[0]["layers"];  // seed order: the first seed's choices
      // The probe over seeds: the mean figures of each run, averaged.
      std::map<std::string, std::vector<double>> probe_means;
      std::vector<double> shares;
      for (const auto& r : runs)
        if (!r["probe"].is_null()) {
          for (auto it = r["probe"]["mean"].begin(); it != r["probe"]["mean"].end(); ++it)
            probe_means[it.key()].push_back(it.value().get<double>());
          shares.push_back(r["probe"]["share_of_training"].get<double>());
        }
      if (!shares.empty()) {
        nlohmann::json pm = nlohmann::json::object();
        for (const auto& [k, v] : probe_means) pm[k] = mean_of(v);
        e["probe"] = {{"runs", shares.size()}, {"mean", pm}, {"share_of_training", mean_of(shares)}};
      }
    }
    strategies.push_back(std::move(e));
  }
  // Differences from vanilla (else from the first strategy), in the primary metric and costs.
  std::string baseline;
  const nlohmann::json* base = nullptr;
  for (const auto& e : strategies)
    if (!e["runs"].empty() && (base == nullptr || e["strategy"] == "vanilla")) base = &e;
  if (base != nullptr) baseline = (*base)["strategy"];
  if (base != nullptr && !primary.empty()) {
    const double bm = (*base)["metrics"][primary]["mean"];
    const double bsaved = (*base)["saved_bytes_mean"]["mean"], bbwd = (*base)["backward_ms"]["mean"];
    const double bflops = (*base)["paper_backward_mflops_per_example"]["mean"];
    for (auto& e : strategies) {
      if (e["runs"].empty() || e["strategy"] == baseline) continue;
      e["metric_diff"] = e["metrics"][primary]["mean"].get<double>() - bm;
      if (bsaved > 0) e["saved_bytes_ratio"] = e["saved_bytes_mean"]["mean"].get<double>() / bsaved;
      if (bbwd > 0) e["backward_ms_ratio"] = e["backward_ms"]["mean"].get<double>() / bbwd;
      if (bflops > 0) e["paper_backward_flops_ratio"] = e["paper_backward_mflops_per_example"]["mean"].get<double>() / bflops;
    }
  }
  return {{"config_source", cmp.value("source", "")},
          {"task", cmp["config"]["data"].value("task", "")},
          {"primary_metric", primary},
          {"baseline", baseline},
          {"seeds", cmp["seeds"]},
          {"strategies", strategies}};
}

std::string report_table(const nlohmann::json& report) {
  const auto rows = table_rows(report);
  std::vector<size_t> w;
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  std::ostringstream os;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) os << (i ? "  " : "") << std::left << std::setw(static_cast<int>(w[i])) << r[i];
    os << "\n";
  }
  return os.str();
}

std::string report_markdown(const nlohmann::json& report, const std::vector<std::string>& plots) {
  std::ostringstream os;
  os << "# leanback compare: " << report.value("task", "") << " (" << report.value("config_source", "")
     << ")\n\nSeeds " << report["seeds"].dump() << "; metric " << report.value("primary_metric", "")
     << " on the dev split at the end of training, mean ± std over seeds; costs are means over the "
        "training log lines (step, forward and backward time per optimizer step; bytes the autograd "
        "tape held for backward after the forward pass), the papers' figures per example.\n\n";
  const auto rows = table_rows(report);
  for (size_t i = 0; i < rows.size(); ++i) {
    os << "|";
    for (const auto& c : rows[i]) os << " " << c << " |";
    os << "\n";
    if (i == 0) {
      os << "|";
      for (size_t j = 0; j < rows[i].size(); ++j) os << "---|";
      os << "\n";
    }
  }
  for (const auto& s : report["strategies"])
    for (const auto& f : s.value("failed", nlohmann::json::array()))
      os << "\n**" << s["strategy"].get<std::string>() << ", seed " << f["seed"] << ": diverged** — "
         << f["error"].get<std::string>() << "\n";
  for (const auto& s : report["strategies"]) {
    if (!s.contains("layers") || s["layers"].empty() || s["strategy"] == "vanilla") continue;
    const bool probed = s.contains("probe");
    os << "\n## " << s["strategy"].get<std::string>() << ": per layer (seed " << s["runs"][0]["seed"]
       << ")\n\n";
    if (probed) {
      const auto& pm = s["probe"]["mean"];
      os << "Gradient-fidelity probe (train.grad_probe_every), mean over layers and probes: local g_w cos "
         << fixed(pm.value("local_g_w_cos", 0.0), 4) << " (rel. error " << fixed(pm.value("local_g_w_rel_err", 0.0), 3)
         << "), local g_x cos " << fixed(pm.value("local_g_x_cos", 0.0), 4) << " (rel. error "
         << fixed(pm.value("local_g_x_rel_err", 0.0), 3) << "), end-to-end g_w cos "
         << fixed(pm.value("end_to_end_g_w_cos", 0.0), 4) << "; its cost "
         << fixed(100 * s["probe"]["share_of_training"].get<double>(), 1) << "% of training time.\n\n";
    }
    os << "| layer | strategy | choice | saved KiB (last call) | backward ms (total) |"
       << (probed ? " g_w cos local / end to end | g_x cos local |\n|---|---|---|---|---|---|---|\n"
                  : "\n|---|---|---|---|---|\n");
    for (const auto& l : s["layers"]) {
      std::string choice = "exact";
      if (l.contains("x_rank"))
        choice = "x rank " + std::to_string(l["x_rank"].get<int64_t>()) + " (" + l.value("x_axis", "") +
                 "), g_y rank " + std::to_string(l["g_y_rank"].get<int64_t>()) + " (" + l.value("g_y_axis", "") +
                 ")" + (l.value("compressing", true) || l.contains("fallback_reason") ? "" : ", exact: no gain");
      if (l.contains("quantizer")) choice = "quantiser " + l["quantizer"].get<std::string>();
      if (l.contains("fallback_reason")) choice += "; fell back to exact";
      os << "| " << l["layer"].get<std::string>() << " | " << l["type"].get<std::string>() << " | " << choice
         << " | " << fixed(l["saved_bytes_last_call"].get<double>() / 1024.0, 1) << " | "
         << fixed(l["backward_ms_total"].get<double>(), 1) << " |";
      if (probed) {
        const nlohmann::json pr = l.value("probe", nlohmann::json::object());
        const auto f = [&](const char* k) { return pr.contains(k) ? fixed(pr[k].get<double>(), 4) : std::string("-"); };
        os << " " << f("local_g_w_cos") << " / " << f("end_to_end_g_w_cos") << " | " << f("local_g_x_cos") << " |";
      }
      os << "\n";
    }
  }
  if (!plots.empty()) {
    os << "\n## Plots\n\n";
    for (const auto& p : plots) os << "![" << fs::path(p).stem().string() << "](" << p << ")\n";
  }
  return os.str();
}

CompareResult compare(const Config& config, const CompareOptions& opt) {
  LB_CHECK(!opt.strategies.empty(), "compare: no strategies given");
  LB_CHECK(opt.seeds >= 1, "compare: --seeds must be at least 1, got ", opt.seeds);
  CompareResult result;
  TrainOptions base;
  base.progress = opt.progress;
  base.quiet = opt.quiet;
  base.device = opt.device;
  std::string dir = opt.out_dir;
  if (dir.empty()) dir = resolve_run_dir(config, base) + "-compare";
  result.dir = dir;
  const fs::path root(dir);
  const nlohmann::json config_j = config.to_json();
  std::vector<int64_t> seeds;
  for (int64_t i = 0; i < opt.seeds; ++i) seeds.push_back(static_cast<int64_t>(config.train.seed) + i);
  // The directory's config must be this one: its finished runs are reused as they are.
  const fs::path cmp_path = root / "compare.json";
  refuse_protected_dir(root, "--out");
  if (fs::exists(cmp_path)) {
    const nlohmann::json old = read_json_file(cmp_path);
    LB_CHECK(old.is_object() && old.contains("config"), cmp_path.string(), ": not a compare file");
    if (old["config"] != config_j) {
      // Only some strategies' settings changed: the others' runs stay valid, and the changed
      // ones may run here once the user has moved their old runs aside (never overwritten).
      const auto changed = changed_strategy_settings(old["config"], config_j);
      if (!changed) {
        const auto patch = nlohmann::json::diff(old["config"], config_j);
        LB_FAIL(dir, " holds a comparison of a different config (first difference at ",
                patch.empty() ? std::string("?") : patch[0].value("path", std::string("?")),
                "); its runs cannot be reused: pass another --out");
      }
      for (const auto& s : *changed)
        LB_CHECK(!fs::exists(root / s) || fs::is_empty(root / s), dir, " holds ", s,
                 " runs made with other backward.strategies.", s, " settings; move ", (root / s).string(),
                 " aside to run ", s, " with these (the other strategies' runs are reused)");
    }
  } else if (!output_dir_fresh(root, "--out")) {
    throw OutputRefused(dir + " exists and is not a compare directory (no compare.json); pass another --out");
  }
  // A compare directory from before markers existed gets one: its compare.json proves it ours.
  create_output_dir(root, OutputKind::Compare, "--out");
  record_written(root, {"compare.json", "report.json", "report.md"});
  io::write_text_atomic(cmp_path.string(), nlohmann::json{{"source", config.source},
                                                          {"config", config_j},
                                                          {"strategies", opt.strategies},
                                                          {"seeds", seeds}}
                                               .dump(2) + "\n");
  bool hook_used = false;
  for (int64_t seed : seeds) {
    for (const auto& s : opt.strategies) {
      const fs::path run = run_dir_of(root, s, seed);
      if (fs::exists(run / "eval_results.json")) {
        if (!opt.quiet) std::cerr << "compare: " << s << " seed " << seed << ": done, reusing " << run.string() << "\n";
        continue;
      }
      if (fs::exists(run / kFailedFile)) {
        if (!opt.quiet)
          std::cerr << "compare: " << s << " seed " << seed << ": diverged in an earlier compare (" << (run / kFailedFile).string()
                    << "); delete " << run.string() << " to run it again\n";
        continue;
      }
      record_written(root, {fs::relative(run, root).generic_string()});
      TrainOptions t = base;
      t.strategy = s;
      t.seed = static_cast<uint64_t>(seed);
      t.out_dir = run.string();
      if (has_checkpoint(run)) t.resume = run.string();
      else t.overwrite = true;  // our own partial run without a checkpoint
      if (opt.interrupt_after > 0 && !hook_used) {
        t.interrupt_after = opt.interrupt_after;
        hook_used = true;
      }
      if (!opt.quiet)
        std::cerr << "compare: " << s << " seed " << seed << (t.resume.empty() ? ": training " : ": resuming ")
                  << run.string() << "\n";
      TrainResult r;
      try {
        r = train(config, t);
      } catch (const Diverged& e) {
        // A strategy that diverges is a result of the comparison, not a reason to stop it;
        // anything else (data, I/O) would fail every run alike and propagates.
        const std::string m = e.what();
        record_written(run, {kFailedFile});
        io::write_text_atomic((run / kFailedFile).string(), m + "\n");
        if (!opt.quiet) std::cerr << "compare: " << s << " seed " << seed << " diverged: " << m << "\n";
        continue;
      }
      if (r.interrupted) {
        result.interrupted = true;
        return result;
      }
    }
  }
  result.report = build_report(dir);
  io::write_text_atomic((root / "report.json").string(), result.report.dump(2) + "\n");
  if (opt.plots) {
    try {
      result.plots = draw_plots(dir);
    } catch (const Error& e) {
      result.plot_error = e.what();
    }
  }
  // Relative plot paths, so the report renders where the directory is moved.
  std::vector<std::string> rel;
  for (const auto& p : result.plots) rel.push_back(fs::relative(p, root).string());
  io::write_text_atomic((root / "report.md").string(), report_markdown(result.report, rel));
  return result;
}

}  // namespace lb::train
