// Strategy::summary(): the typed view generic code reads carries what each strategy's
// report() says (vanilla's common fields, INSTANT's ranks and calibration cost, HOT's
// quantiser choice, a fallback's reason); to_json() has the generic keys and report() is it
// plus the strategy's own; from_json() reads new reports and those written before the
// generic keys; the Calibrator's log lines and the accounting totals come from it.
#include <gtest/gtest.h>

#include "lb/nn/backward/accounting.h"
#include "lb/nn/backward/calibration.h"
#include "lb/nn/backward/factory.h"
#include "lb/nn/backward/summary.h"
#include "lb/ops.h"
#include "testing/testing.h"

namespace lb::nn::backward {
namespace {

std::shared_ptr<Strategy> make(nlohmann::json spec, const std::string& layer) {
  std::shared_ptr<Strategy> s = make_strategy(spec, "test");
  s->set_layer(layer, 7);
  return s;
}

// One forward/backward of y = x wᵀ + b (x (2, 8, 16), w (32, 16)) through `s`; `outlier`
// makes one token of g_y 50× larger (HOT's LQS then keeps per-token scales).
void run_linear(const std::shared_ptr<Strategy>& s, uint64_t seed, bool outlier = false) {
  Tensor x = testing::randn({2, 8, 16}, seed, DType::F32), w = testing::randn({32, 16}, seed + 1, DType::F32);
  x.set_requires_grad();
  w.set_requires_grad();
  Tensor g = testing::randn({2, 8, 32}, seed + 2, DType::F32);
  if (outlier)
    for (int64_t o = 0; o < 32; ++o) g.data<float>()[5 * 32 + o] *= 50.f;
  strategy_linear(x, w, testing::randn({32}, seed + 3, DType::F32), s).backward(g);
}

void calibrate(const std::shared_ptr<Strategy>& s, bool outlier = false) {
  s->begin_calibration();
  run_linear(s, 100, outlier);
  s->finish_calibration();
}

// report() = summary().to_json() + hyperparams + the strategy's own key(s).
void expect_report_extends_summary(const Strategy& s) {
  const nlohmann::json sum = s.summary().to_json(), rep = s.report();
  for (auto it = sum.begin(); it != sum.end(); ++it) EXPECT_EQ(rep.at(it.key()), it.value()) << it.key();
  EXPECT_EQ(rep.at("hyperparams"), s.hyperparams());
}

TEST(StrategySummary, VanillaCommonFields) {
  auto s = make({{"type", "vanilla"}}, "enc.fc");
  run_linear(s, 1);
  const StrategySummary sum = s->summary();
  EXPECT_EQ(sum.layer, "enc.fc");
  EXPECT_EQ(sum.type, "vanilla");
  EXPECT_FALSE(sum.conv);
  EXPECT_FALSE(sum.fallback_reason);
  EXPECT_EQ(sum.geometry.B, 2);
  EXPECT_EQ(sum.geometry.L, 8);
  EXPECT_EQ(sum.geometry.I, 16);
  EXPECT_EQ(sum.geometry.O, 32);
  EXPECT_EQ(sum.geometry.sequences, 0);
  EXPECT_DOUBLE_EQ(sum.paper.backward_flops, 4.0 * 8 * 16 * 32);
  EXPECT_DOUBLE_EQ(sum.paper.saved_bytes_fp32, 4.0 * 8 * 16);
  EXPECT_EQ(sum.measured.backward_calls, 1);
  EXPECT_EQ(sum.measured.saved_bytes_last_call, 2 * 8 * 16 * 4);
  EXPECT_EQ(sum.measured.calibration_backward_calls, 0);
  EXPECT_FALSE(sum.compressing);
  EXPECT_FALSE(sum.ranks);
  EXPECT_FALSE(sum.quantizer);
  EXPECT_FALSE(sum.calibration);
  const nlohmann::json j = sum.to_json();
  for (const char* k : {"layer", "type", "conv", "geometry", "paper", "measured", "compressing"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* k : {"fallback_reason", "ranks", "quantizer", "calibration"}) EXPECT_FALSE(j.contains(k)) << k;
  EXPECT_EQ(j["measured"]["saved_bytes_last_call"], 2 * 8 * 16 * 4);
  EXPECT_DOUBLE_EQ(j["paper"]["backward_mflops_per_sample"].get<double>(), 4.0 * 8 * 16 * 32 / 1e6);
  expect_report_extends_summary(*s);
  s->set_layer("enc.conv", 8, /*conv=*/true);
  EXPECT_TRUE(s->summary().conv);
}

TEST(StrategySummary, InstantRanksCalibrationAndFallback) {
  auto s = make({{"type", "instant"}, {"axis", "token"}, {"rank", 2}}, "enc.fc");
  calibrate(s);
  run_linear(s, 1);
  const StrategySummary sum = s->summary();
  const nlohmann::json rep = s->report();
  EXPECT_EQ(sum.type, "instant");
  EXPECT_TRUE(sum.compressing);
  EXPECT_EQ(sum.compressing, rep["instant"]["compressing"].get<bool>());
  ASSERT_TRUE(sum.ranks);
  const auto expect_rank = [&](const char* name, const StrategySummary::OperandRank& r) {
    SCOPED_TRACE(name);
    const nlohmann::json& b = rep["instant"][name];
    EXPECT_TRUE(r.valid);
    EXPECT_EQ(r.rank, 2);
    EXPECT_EQ(r.rank, b["rank"].get<int64_t>());
    EXPECT_EQ(r.n, b["n"].get<int64_t>());
    EXPECT_EQ(r.axis, "token");
    EXPECT_EQ(r.axis, b["axis"].get<std::string>());
    EXPECT_EQ(r.to_json(), b);  // the generic view keeps every figure of INSTANT's own
  };
  expect_rank("x", sum.ranks->x);
  expect_rank("g_y", sum.ranks->g_y);
  ASSERT_TRUE(sum.calibration);
  EXPECT_EQ(sum.calibration->calibrations, 1);
  EXPECT_GT(sum.calibration->flops, 0);
  EXPECT_EQ(sum.measured.calibration_backward_calls, 1);
  EXPECT_EQ(sum.measured.backward_calls, 1);
  EXPECT_FALSE(sum.quantizer);
  const nlohmann::json j = sum.to_json();
  EXPECT_EQ(j["ranks"]["x"], rep["instant"]["x"]);
  EXPECT_EQ(j["ranks"]["g_y"], rep["instant"]["g_y"]);
  // The report's "calibration" keeps its keys (checkpoints, the calibration log read them).
  for (const char* k : {"flops", "statistics_and_eigh_ms", "backward_calls", "backward_ms"})
    EXPECT_TRUE(rep["calibration"].contains(k)) << k;
  EXPECT_EQ(rep["calibration"]["backward_calls"], 1);
  expect_report_extends_summary(*s);

  s->record().fall_back_to_exact("eigh did not converge (test)");
  const StrategySummary fell = s->summary();
  ASSERT_TRUE(fell.fallback_reason);
  EXPECT_EQ(*fell.fallback_reason, "eigh did not converge (test)");
  EXPECT_EQ(*fell.fallback_reason, s->report()["fallback_reason"].get<std::string>());
  EXPECT_FALSE(fell.compressing);
  EXPECT_EQ(fell.to_json()["fallback_reason"], "eigh did not converge (test)");
}

TEST(StrategySummary, InstantBeforeCalibrationHasInvalidRanks) {
  auto s = make({{"type", "instant"}}, "enc.fc");
  run_linear(s, 1);
  const StrategySummary sum = s->summary();
  ASSERT_TRUE(sum.ranks);
  EXPECT_FALSE(sum.ranks->x.valid);
  EXPECT_EQ(sum.ranks->x.rank, 0);
  EXPECT_FALSE(sum.compressing);
  EXPECT_EQ(sum.to_json()["ranks"]["x"], nlohmann::json({{"valid", false}}));
}

TEST(StrategySummary, HotQuantizerChoice) {
  auto s = make({{"type", "hot"}}, "enc.fc");
  EXPECT_EQ(s->summary().quantizer, std::optional<std::string>("undecided"));
  calibrate(s, /*outlier=*/true);
  run_linear(s, 1);
  const StrategySummary sum = s->summary();
  const nlohmann::json rep = s->report();
  EXPECT_EQ(sum.type, "hot");
  ASSERT_TRUE(sum.quantizer);
  EXPECT_EQ(*sum.quantizer, rep["hot"]["lqs"]["choice"].get<std::string>());
  EXPECT_EQ(*sum.quantizer, "per_token");
  EXPECT_TRUE(sum.compressing);
  EXPECT_FALSE(sum.ranks);
  EXPECT_FALSE(sum.calibration);
  EXPECT_EQ(sum.measured.backward_calls, 1);
  EXPECT_EQ(sum.to_json()["quantizer"], "per_token");
  EXPECT_TRUE(rep["hot"]["lqs"].contains("err_token"));  // HOT's details stay under its own key
  expect_report_extends_summary(*s);
  s->record().fall_back_to_exact("test");
  EXPECT_FALSE(s->summary().compressing);
  EXPECT_EQ(s->summary().fallback_reason, std::optional<std::string>("test"));
}

// from_json(report) gives summary() back (up to the paper figures' unit round trip).
void expect_round_trip(const Strategy& s) {
  const StrategySummary a = s.summary(), b = StrategySummary::from_json(s.report());
  EXPECT_EQ(b.to_json().dump(), StrategySummary::from_json(a.to_json()).to_json().dump());
  EXPECT_EQ(b.layer, a.layer);
  EXPECT_EQ(b.fallback_reason, a.fallback_reason);
  EXPECT_EQ(b.compressing, a.compressing);
  EXPECT_EQ(b.quantizer, a.quantizer);
  EXPECT_EQ(b.ranks.has_value(), a.ranks.has_value());
  if (a.ranks) EXPECT_EQ(b.ranks->g_y.to_json(), a.ranks->g_y.to_json());
  EXPECT_EQ(b.measured.saved_bytes_last_call, a.measured.saved_bytes_last_call);
  EXPECT_NEAR(b.paper.backward_flops, a.paper.backward_flops, 1e-6 * a.paper.backward_flops);
}

TEST(StrategySummary, FromJsonRoundTrip) {
  auto v = make({{"type", "vanilla"}}, "a");
  auto in = make({{"type", "instant"}, {"axis", "token"}, {"rank", 2}}, "b");
  auto hot = make({{"type", "hot"}}, "c");
  for (const auto& s : {v, in, hot}) {
    calibrate(s, true);
    run_linear(s, 1);
    SCOPED_TRACE(s->type());
    expect_round_trip(*s);
  }
  in->record().fall_back_to_exact("why");
  expect_round_trip(*in);
}

TEST(StrategySummary, FromJsonReadsReportsWithoutGenericKeys) {
  // Layer entries of eval_results.json as runs wrote them before summary(): the facts sit
  // under "instant" / "hot" only.
  const nlohmann::json instant = {
      {"layer", "enc.q"},
      {"type", "instant"},
      {"geometry", {{"B", 2}, {"L", 8}, {"I", 16}, {"O", 32}}},
      {"measured", {{"backward_calls", 3}, {"backward_ms_total", 1.5}, {"saved_bytes_last_call", 256}}},
      {"paper", {{"backward_mflops_per_sample", 0.5}, {"saved_mib_fp32_per_sample", 0.25}}},
      {"instant",
       {{"calibrations", 2},
        {"compressing", true},
        {"x", {{"valid", true}, {"axis", "token"}, {"n", 8}, {"rank", 3}}},
        {"g_y", {{"valid", false}}}}},
      {"calibration", {{"flops", 10.0}, {"statistics_and_eigh_ms", 2.0}, {"backward_calls", 1}, {"backward_ms", 0.5}}}};
  const StrategySummary a = StrategySummary::from_json(instant);
  EXPECT_EQ(a.layer, "enc.q");
  EXPECT_EQ(a.geometry.L, 8);
  EXPECT_EQ(a.measured.backward_calls, 3);
  EXPECT_EQ(a.measured.saved_bytes_last_call, 256);
  EXPECT_DOUBLE_EQ(a.paper.backward_flops, 0.5e6);
  EXPECT_DOUBLE_EQ(a.paper.saved_bytes_fp32, 0.25 * 1024 * 1024);
  EXPECT_TRUE(a.compressing);
  ASSERT_TRUE(a.ranks);
  EXPECT_EQ(a.ranks->x.rank, 3);
  EXPECT_EQ(a.ranks->x.axis, "token");
  EXPECT_FALSE(a.ranks->g_y.valid);
  ASSERT_TRUE(a.calibration);
  EXPECT_EQ(a.calibration->calibrations, 2);
  EXPECT_DOUBLE_EQ(a.calibration->ms, 2.0);
  EXPECT_FALSE(a.quantizer);

  nlohmann::json fell = instant;
  fell["fallback_reason"] = "eigh";
  EXPECT_FALSE(StrategySummary::from_json(fell).compressing);  // the old flag ignored fallbacks

  const nlohmann::json hot = {{"layer", "enc.k"},
                              {"type", "hot"},
                              {"measured", {{"saved_bytes_last_call", 64}}},
                              {"hot", {{"lqs", {{"choice", "per_tensor"}, {"err_token", 1.0}}}}}};
  const StrategySummary h = StrategySummary::from_json(hot);
  EXPECT_EQ(h.quantizer, std::optional<std::string>("per_tensor"));
  EXPECT_TRUE(h.compressing);
  EXPECT_FALSE(h.ranks);
  EXPECT_FALSE(h.calibration);

  const StrategySummary v = StrategySummary::from_json({{"layer", "enc.v"}, {"type", "vanilla"}});
  EXPECT_FALSE(v.compressing);
  EXPECT_FALSE(v.ranks);
  EXPECT_FALSE(v.quantizer);
  EXPECT_FALSE(StrategySummary::from_json(nullptr).ranks);  // not a report: empty, no throw
}

TEST(StrategySummary, CalibratorLogAndAccountingReadIt) {
  auto in = make({{"type", "instant"}, {"axis", "token"}, {"rank", 2}}, "a");
  auto hot = make({{"type", "hot"}}, "b");
  auto v = make({{"type", "vanilla"}}, "c");
  Calibrator cal(std::vector<std::shared_ptr<Strategy>>{in, hot, v});
  ASSERT_TRUE(cal.calibrate(0, [&](int64_t i) { for (const auto& s : {in, hot}) run_linear(s, 10 * (i + 1), true); },
                            [] {}));
  const nlohmann::json layers = cal.report()["layers"];
  ASSERT_EQ(layers.size(), 2u);  // the layers that took part
  // The calibration lines of metrics.jsonl keep their keys: layer, type, x, g_y, cost.
  EXPECT_EQ(layers[0]["layer"], "a");
  EXPECT_EQ(layers[0]["x"], in->report()["instant"]["x"]);
  EXPECT_EQ(layers[0]["g_y"], in->report()["instant"]["g_y"]);
  for (const char* k : {"flops", "statistics_and_eigh_ms", "backward_calls", "backward_ms"})
    EXPECT_EQ(layers[0]["cost"][k], in->report()["calibration"][k]) << k;
  EXPECT_EQ(layers[1]["type"], "hot");
  EXPECT_EQ(layers[1]["quantizer"], hot->report()["hot"]["lqs"]["choice"]);
  EXPECT_FALSE(layers[1].contains("x"));
  EXPECT_FALSE(layers[1].contains("cost"));

  for (const auto& s : {in, hot, v}) run_linear(s, 1);
  const nlohmann::json acc = accounting_report({in, hot, v});
  double mflops = 0;
  int64_t kept = 0;
  for (const auto& s : {in, hot, v}) {
    mflops += s->summary().paper.backward_flops / 1e6;
    kept += s->summary().measured.saved_bytes_last_call;
  }
  EXPECT_DOUBLE_EQ(acc["total"]["paper_backward_mflops_per_sample"].get<double>(), mflops);
  EXPECT_EQ(acc["total"]["measured_saved_bytes_last_call"], kept);
  ASSERT_EQ(acc["layers"].size(), 3u);
  EXPECT_EQ(acc["layers"][0], in->report());
}

}  // namespace
}  // namespace lb::nn::backward
