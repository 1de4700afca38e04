// `leanback compare` through the library: three strategies on the synthetic task, the report's
// fields, same seed -> same numbers, reuse of finished runs, resume of an interrupted one, a
// change of one strategy's settings rerunning that strategy only, and a directory of another
// config refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/train/report/compare.h"
#include "lb/train/report/run_summary.h"
#include "testing/testing.h"
#include "testing/train_configs.h"

namespace lb::train {
namespace {

namespace fs = std::filesystem;
using lb::testing::TempDir;

Config tiny_config() {
  nlohmann::json j = lb::testing::tiny_bert_config(6, 0.0);
  j["train"]["eval_every"] = 3;
  j["train"]["grad_probe_every"] = 3;
  return Config::from_json(j, "tiny.json");
}

CompareOptions quiet(const std::string& out) {
  CompareOptions o;
  o.out_dir = out;
  o.quiet = true;
  o.progress = 0;
  o.plots = false;
  return o;
}

nlohmann::json read(const std::string& path) { return nlohmann::json::parse(std::ifstream(path)); }

const nlohmann::json& strategy(const nlohmann::json& report, const std::string& name) {
  for (const auto& s : report["strategies"])
    if (s["strategy"] == name) return s;
  throw Error("no strategy " + name + " in the report");
}

TEST(Compare, ThreeStrategiesReportAndSameSeedSameNumbers) {
  TempDir tmp("lb_compare");
  const Config c = tiny_config();
  const CompareResult a = compare(c, quiet(tmp.sub("a")));
  ASSERT_FALSE(a.interrupted);
  for (const char* f : {"compare.json", "report.json", "report.md"}) EXPECT_TRUE(fs::exists(tmp.sub("a") + "/" + f)) << f;
  const nlohmann::json report = read(tmp.sub("a") + "/report.json");
  EXPECT_EQ(report, a.report);
  EXPECT_EQ(report["primary_metric"], "eval_accuracy");
  EXPECT_EQ(report["baseline"], "vanilla");
  ASSERT_EQ(report["strategies"].size(), 3u);
  for (const auto& s : report["strategies"]) {
    ASSERT_EQ(s["runs"].size(), 1u) << s["strategy"];
    EXPECT_TRUE(fs::exists(s["runs"][0]["dir"].get<std::string>() + "/eval_results.json"));
    for (const char* k : {"step_ms", "backward_ms", "examples_per_s", "saved_bytes_mean", "saved_bytes_peak",
                          "paper_saved_mib_fp32_per_example", "paper_backward_mflops_per_example",
                          "calibration_share"})
      EXPECT_TRUE(s[k].contains("mean")) << s["strategy"] << " " << k;
    EXPECT_GT(s["saved_bytes_mean"]["mean"].get<double>(), 0) << s["strategy"];
    EXPECT_TRUE(s["metrics"].contains("eval_accuracy"));
    EXPECT_FALSE(s["peak_bytes_by_tag"].empty());
  }
  // The compressed strategies keep fewer bytes by the papers' count and record their choices.
  const double vanilla_paper = strategy(report, "vanilla")["paper_saved_mib_fp32_per_example"]["mean"];
  EXPECT_LT(strategy(report, "hot")["paper_saved_mib_fp32_per_example"]["mean"].get<double>(), vanilla_paper);
  EXPECT_TRUE(strategy(report, "hot").contains("metric_diff"));
  bool rank = false, quantizer = false;
  for (const auto& l : strategy(report, "instant")["layers"]) rank = rank || l.contains("x_rank");
  for (const auto& l : strategy(report, "hot")["layers"]) quantizer = quantizer || l.contains("quantizer");
  EXPECT_TRUE(rank);
  EXPECT_TRUE(quantizer);
  EXPECT_GT(strategy(report, "instant")["calibration_share"]["mean"].get<double>(), 0);
  // The gradient-fidelity probe, summarised per strategy and per layer (not for vanilla).
  EXPECT_FALSE(strategy(report, "vanilla").contains("probe"));
  for (const char* s : {"instant", "hot"}) {
    const auto& p = strategy(report, s)["probe"];
    EXPECT_GT(p["mean"]["local_g_w_cos"].get<double>(), 0.3) << s;
    EXPECT_LE(p["mean"]["local_g_w_cos"].get<double>(), 1.0 + 1e-9) << s;
    EXPECT_TRUE(p["mean"].contains("end_to_end_g_w_cos")) << s;
    EXPECT_TRUE(strategy(report, s)["layers"][0].contains("probe")) << s;
  }
  const std::string md = [&] {
    std::ifstream in(tmp.sub("a") + "/report.md");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  EXPECT_NE(md.find("| vanilla |"), std::string::npos) << md;
  EXPECT_NE(md.find("## instant: per layer"), std::string::npos) << md;
  EXPECT_NE(report_table(report).find("eval_accuracy"), std::string::npos);

  // Same config and seed elsewhere: the same losses and metrics (timings aside).
  const CompareResult b = compare(c, quiet(tmp.sub("b")));
  for (const char* s : {"vanilla", "instant", "hot"}) {
    EXPECT_EQ(strategy(a.report, s)["metrics"], strategy(b.report, s)["metrics"]) << s;
    EXPECT_EQ(strategy(a.report, s)["saved_bytes_mean"], strategy(b.report, s)["saved_bytes_mean"]) << s;
  }
}

TEST(Compare, ReusesFinishedRunsAndResumesAnInterruptedOne) {
  TempDir tmp("lb_compare");
  const Config c = tiny_config();
  CompareOptions o = quiet(tmp.sub("cmp"));
  o.strategies = {"vanilla", "hot"};
  o.interrupt_after = 2;  // the first run (vanilla, seed 7) stops after 2 of its 6 steps
  const CompareResult cut = compare(c, o);
  EXPECT_TRUE(cut.interrupted);
  EXPECT_FALSE(fs::exists(tmp.sub("cmp") + "/vanilla/seed-7/eval_results.json"));
  EXPECT_TRUE(fs::exists(tmp.sub("cmp") + "/vanilla/seed-7/checkpoint-2/trainer_state.json"));

  o.interrupt_after = 0;
  const CompareResult resumed = compare(c, o);
  ASSERT_FALSE(resumed.interrupted);
  // The resumed run equals an uninterrupted one.
  CompareOptions fresh = quiet(tmp.sub("fresh"));
  fresh.strategies = {"vanilla"};
  const CompareResult full = compare(c, fresh);
  EXPECT_EQ(strategy(resumed.report, "vanilla")["metrics"], strategy(full.report, "vanilla")["metrics"]);

  // A third strategy later: the two finished runs are reused as they are.
  const auto stamp = fs::last_write_time(tmp.sub("cmp") + "/hot/seed-7/metrics.jsonl");
  o.strategies = {"vanilla", "hot", "instant"};
  const CompareResult more = compare(c, o);
  EXPECT_EQ(fs::last_write_time(tmp.sub("cmp") + "/hot/seed-7/metrics.jsonl"), stamp);
  EXPECT_EQ(more.report["strategies"].size(), 3u);
  EXPECT_EQ(strategy(more.report, "hot")["metrics"], strategy(resumed.report, "hot")["metrics"]);

  // Another config into the same directory is refused, naming the first difference.
  nlohmann::json other = lb::testing::tiny_bert_config(6, 0.0);
  other["train"]["eval_every"] = 3;
  other["train"]["grad_probe_every"] = 3;
  other["optimizer"]["lr"] = 1e-3;
  try {
    compare(Config::from_json(other, "tiny.json"), o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different config (first difference at /optimizer/lr)"), std::string::npos)
        << e.what();
  }
  // A change of one strategy's settings only: the others' runs stay valid; the changed one's
  // old runs are refused until moved aside (never overwritten), then it runs alone.
  nlohmann::json tuned = lb::testing::tiny_bert_config(6, 0.0);
  tuned["train"]["eval_every"] = 3;
  tuned["train"]["grad_probe_every"] = 3;
  tuned["backward"]["strategies"]["hot"]["full_basis"] = true;
  try {
    compare(Config::from_json(tuned, "tiny.json"), o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds hot runs made with other backward.strategies.hot settings"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(fs::last_write_time(tmp.sub("cmp") + "/hot/seed-7/metrics.jsonl"), stamp);
  fs::rename(tmp.sub("cmp") + "/hot", tmp.sub("hot-before"));
  const auto vanilla_stamp = fs::last_write_time(tmp.sub("cmp") + "/vanilla/seed-7/metrics.jsonl");
  const CompareResult retuned = compare(Config::from_json(tuned, "tiny.json"), o);
  EXPECT_EQ(fs::last_write_time(tmp.sub("cmp") + "/vanilla/seed-7/metrics.jsonl"), vanilla_stamp);
  EXPECT_TRUE(fs::exists(tmp.sub("cmp") + "/hot/seed-7/eval_results.json"));
  EXPECT_EQ(strategy(retuned.report, "vanilla")["metrics"], strategy(more.report, "vanilla")["metrics"]);
  EXPECT_EQ(read(tmp.sub("cmp") + "/compare.json")["config"]["backward"]["strategies"]["hot"]["full_basis"], true);
  // Settings are compared typed: INSTANT's default oversampling written out is the same
  // setting as left out, so nothing is refused or rerun.
  nlohmann::json spelled = tuned;
  spelled["backward"]["strategies"]["instant"]["oversampling"] = 7;
  const auto instant_stamp = fs::last_write_time(tmp.sub("cmp") + "/instant/seed-7/metrics.jsonl");
  compare(Config::from_json(spelled, "tiny.json"), o);
  EXPECT_EQ(fs::last_write_time(tmp.sub("cmp") + "/instant/seed-7/metrics.jsonl"), instant_stamp);

  // A directory that is not a comparison is never written into.
  fs::create_directories(tmp.sub("mine"));
  std::ofstream(tmp.sub("mine") + "/notes.txt") << "mine";
  try {
    compare(c, quiet(tmp.sub("mine")));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a compare directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(fs::directory_iterator(tmp.sub("mine"))->path().filename(), "notes.txt");
}


// A run that diverges is recorded as such and the comparison goes on; a rerun does not retry.
TEST(Compare, DivergedRunsAreReportedNotFatal) {
  TempDir tmp("lb_compare");
  nlohmann::json j = lb::testing::tiny_bert_config(4, 0.0);
  j["optimizer"] = {{"type", "sgd"}, {"lr", 1e30}};
  j["schedule"] = {{"type", "constant"}};
  j["train"]["max_grad_norm"] = 0;
  CompareOptions o = quiet(tmp.sub("cmp"));
  o.strategies = {"vanilla", "hot"};
  const CompareResult r = compare(Config::from_json(j, "tiny.json"), o);
  for (const char* s : {"vanilla", "hot"}) {
    const auto& e = strategy(r.report, s);
    EXPECT_TRUE(e["runs"].empty()) << s;
    ASSERT_EQ(e["failed"].size(), 1u) << s;
    EXPECT_NE(e["failed"][0]["error"].get<std::string>().find("step "), std::string::npos) << s;
  }
  EXPECT_NE(report_table(r.report).find("0 (+1 diverged)"), std::string::npos) << report_table(r.report);
  const auto stamp = fs::last_write_time(tmp.sub("cmp") + "/hot/seed-7/compare_failed.txt");
  compare(Config::from_json(j, "tiny.json"), o);
  EXPECT_EQ(fs::last_write_time(tmp.sub("cmp") + "/hot/seed-7/compare_failed.txt"), stamp);
}

// A run directory read typed: means and maxima over the training lines, task metrics only,
// the calibration's share, the probe's figures per layer and over layers.
TEST(RunSummary, ReadsTheRunsFilesTyped) {
  TempDir tmp("lb_run_summary");
  const fs::path run = tmp.path() / "run";
  fs::create_directories(run);
  std::ofstream(run / "eval_results.json") << nlohmann::json{
      {"final", {{"eval_accuracy", 0.75}, {"eval_loss", 0.5}, {"eval_runtime_s", 1.0}, {"eval_samples", 8}}},
      {"primary_metric", "eval_accuracy"},
      {"train_runtime_s", 2.0},
      {"train_samples_per_second", 10.0},
      {"grad_probe_ms_total", 100.0},
      {"layers", nlohmann::json::array({{{"layer", "enc.0.fc"}, {"type", "hot"}}})}};
  std::ofstream m(run / "metrics.jsonl");
  m << nlohmann::json{{"type", "train"}, {"step", 5}, {"step_ms", 10.0}, {"saved_bytes", 100.0},
                      {"saved_bytes_max", 150.0}, {"peak_bytes_by_tag", {{"a", 3.0}}}}
    << "\n"
    << nlohmann::json{{"type", "calibration"}, {"ms", 500.0}} << "\n"
    << nlohmann::json{{"type", "probe"},
                      {"layers", {{{"layer", "enc.0.fc"}, {"local", {{"g_w", {{"cos", 0.9}, {"rel_err", 0.1}}}}}}}}}
    << "\n"
    << nlohmann::json{{"type", "train"}, {"step", 10}, {"step_ms", 20.0}, {"saved_bytes", 300.0},
                      {"saved_bytes_max", 120.0}, {"peak_bytes_by_tag", {{"a", 1.0}, {"b", 2.0}}}}
    << "\n";
  m.close();
  const RunSummary r = RunSummary::read(run, 7);
  EXPECT_EQ(r.seed, 7);
  EXPECT_EQ(r.steps, 10);
  EXPECT_DOUBLE_EQ(r.step_ms, 15.0);
  EXPECT_DOUBLE_EQ(r.saved_bytes_mean, 200.0);
  EXPECT_DOUBLE_EQ(r.saved_bytes_peak, 150.0);
  EXPECT_EQ(r.peak_bytes_by_tag, (std::map<std::string, double>{{"a", 3.0}, {"b", 2.0}}));
  EXPECT_EQ(r.metrics, (std::map<std::string, double>{{"eval_accuracy", 0.75}, {"eval_loss", 0.5}}));
  EXPECT_EQ(r.primary_metric, "eval_accuracy");
  EXPECT_DOUBLE_EQ(r.calibration_share, 0.2);  // 500 ms of 500 + 2000
  ASSERT_TRUE(r.probe.has_value());
  EXPECT_DOUBLE_EQ(r.probe->mean.at("local_g_w_cos"), 0.9);
  EXPECT_DOUBLE_EQ(r.probe->share_of_training, 0.05);
  ASSERT_EQ(r.layers.size(), 1u);
  const nlohmann::json layers = r.layers_json();
  EXPECT_EQ(layers[0]["type"], "hot");
  EXPECT_DOUBLE_EQ(layers[0]["probe"]["local_g_w_rel_err"].get<double>(), 0.1);
  EXPECT_EQ(r.to_json()["examples_per_s"], 10.0);
}

}  // namespace
}  // namespace lb::train
