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
#include "lb/train/run/output_dir.h"
#include "lb/train/report/plots.h"
#include "lb/train/report/run_summary.h"
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

// Mean and std over the runs of one figure.
nlohmann::json over_runs(const std::vector<RunSummary>& runs, double RunSummary::*figure) {
  std::vector<double> v;
  for (const auto& r : runs) v.push_back(r.*figure);
  return {{"mean", mean_of(v)}, {"std", std_of(v)}};
}

// report.json's figures of a strategy: mean and std over its runs.
const std::vector<std::pair<const char*, double RunSummary::*>> kFigures = {
    {"step_ms", &RunSummary::step_ms},
    {"forward_ms", &RunSummary::forward_ms},
    {"backward_ms", &RunSummary::backward_ms},
    {"data_wait_ms", &RunSummary::data_wait_ms},
    {"examples_per_s", &RunSummary::examples_per_s},
    {"saved_bytes_mean", &RunSummary::saved_bytes_mean},
    {"saved_bytes_peak", &RunSummary::saved_bytes_peak},
    {"activation_peak_bytes", &RunSummary::activation_peak_bytes},
    {"paper_saved_mib_fp32_per_example", &RunSummary::paper_saved_mib_fp32_per_example},
    {"paper_backward_mflops_per_example", &RunSummary::paper_backward_mflops_per_example},
    {"peak_bytes", &RunSummary::peak_bytes},
    {"calibration_share", &RunSummary::calibration_share},
    {"calibration_ms", &RunSummary::calibration_ms},
    {"train_runtime_s", &RunSummary::train_runtime_s},
    {"minutes_per_epoch", &RunSummary::minutes_per_epoch}};

// One strategy's entry of report.json from its finished runs (seed order).
void summarize_strategy(nlohmann::json& e, const std::vector<RunSummary>& runs) {
  nlohmann::json runs_j = nlohmann::json::array();
  for (const auto& r : runs) runs_j.push_back(r.to_json());
  e["runs"] = runs_j;
  if (runs.empty()) return;
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [name, first] : runs[0].metrics) {
    std::vector<double> v;
    for (const auto& r : runs) v.push_back(r.metrics.count(name) ? r.metrics.at(name) : 0.0);
    metrics[name] = {{"mean", mean_of(v)}, {"std", std_of(v)}, {"values", v}};
  }
  e["metrics"] = metrics;
  for (const auto& [key, figure] : kFigures) e[key] = over_runs(runs, figure);
  std::map<std::string, double> by_tag;
  for (const auto& r : runs)
    for (const auto& [tag, bytes] : r.peak_bytes_by_tag) by_tag[tag] = std::max(by_tag[tag], bytes);
  e["peak_bytes_by_tag"] = by_tag;
  e["layers"] = runs[0].layers_json();  // seed order: the first seed's choices
  // The probe over seeds: the mean figures of each run, averaged.
  std::map<std::string, std::vector<double>> probe_means;
  std::vector<double> shares;
  for (const auto& r : runs)
    if (r.probe) {
      for (const auto& [k, v] : r.probe->mean) probe_means[k].push_back(v);
      shares.push_back(r.probe->share_of_training);
    }
  if (!shares.empty()) {
    nlohmann::json pm = nlohmann::json::object();
    for (const auto& [k, v] : probe_means) pm[k] = mean_of(v);
    e["probe"] = {{"runs", shares.size()}, {"mean", pm}, {"share_of_training", mean_of(shares)}};
  }
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
    std::vector<RunSummary> runs;
    nlohmann::json failed = nlohmann::json::array();
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
      runs.push_back(RunSummary::read(run, seed.get<int64_t>()));
      if (primary.empty()) primary = runs.back().primary_metric;
    }
    nlohmann::json e = {{"strategy", s}, {"missing", missing}, {"failed", failed}};
    summarize_strategy(e, runs);
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
