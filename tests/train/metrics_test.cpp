// Metrics against sklearn/scipy values (tests/fixtures/metrics_golden.json, written by
// tools/golden/gen_metrics.py), the GLUE metric sets built from them, and bad inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/train/report/metrics.h"
#include "testing/testing.h"

namespace lb::train {
namespace {

// Exact formulas on both sides; only summation order differs.
constexpr double kTol = 1e-12;

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream in(lb::testing::fixture_path("metrics_golden.json"));
    if (!in) throw Error("missing tests/fixtures/metrics_golden.json (run tools/golden/gen_metrics.py)");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// A fixture value: a number, or null where sklearn/scipy gave NaN.
void expect_value(double actual, const nlohmann::json& expected, const std::string& what) {
  if (expected.is_null()) {
    EXPECT_TRUE(std::isnan(actual)) << what << " = " << actual << ", scipy gives NaN";
  } else {
    EXPECT_NEAR(actual, expected.get<double>(), kTol) << what;
  }
}

template <typename Fn>
void expect_error(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected lb::Error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Metrics, FixtureRecordsLibraryVersions) {
  const auto& v = golden().at("versions");
  EXPECT_TRUE(v.contains("scikit-learn") && v.contains("scipy") && v.contains("numpy"));
  EXPECT_GE(golden().at("labels").size(), 15u);
  EXPECT_GE(golden().at("correlations").size(), 10u);
}

// Calls fn(case, name, a, b) for each case of a fixture section, a and b being the two
// input vectors ("pred"/"gold" or "x"/"y") as T.
template <typename T, typename Fn>
void for_each_case(const char* section, const char* a_key, const char* b_key, Fn fn) {
  for (const auto& c : golden().at(section))
    fn(c, c.at("name").get<std::string>(), c.at(a_key).get<std::vector<T>>(),
       c.at(b_key).get<std::vector<T>>());
}

TEST(Metrics, ClassificationMatchesSklearn) {
  for_each_case<int64_t>("labels", "pred", "gold", [](const auto& c, const std::string& name,
                                                     const auto& pred, const auto& gold) {
    expect_value(accuracy(pred, gold), c.at("accuracy"), name + " accuracy");
    expect_value(matthews_corrcoef(pred, gold), c.at("matthews"), name + " matthews");
    if (c.contains("f1")) {
      expect_value(f1_binary(pred, gold), c.at("f1"), name + " f1");
    } else {
      expect_error([&] { f1_binary(pred, gold); }, "labels must be 0 or 1");
    }
  });
}

TEST(Metrics, CorrelationsMatchScipy) {
  for_each_case<double>("correlations", "x", "y", [](const auto& c, const std::string& name,
                                                     const auto& x, const auto& y) {
    expect_value(pearson(x, y), c.at("pearson"), name + " pearson");
    expect_value(spearman(x, y), c.at("spearman"), name + " spearman");
  });
}

// glue_metrics(task) on every case of a fixture section that has all the expected values
// (and, for classification, only the task's classes): exactly the listed keys (metric key,
// fixture key), each equal to the fixture's value. Returns how many cases were checked.
int check_glue_metrics(const char* section, const char* a_key, const char* b_key,
                       const std::string& task,
                       const std::vector<std::pair<std::string, std::string>>& keys) {
  int checked = 0;
  for_each_case<double>(section, a_key, b_key, [&](const auto& c, const std::string& name,
                                                   const auto& pred, const auto& gold) {
    const auto& t = data::glue_task(task);
    for (const auto& k : keys)
      if (!c.contains(k.second)) return;
    const auto outside = [&](double v) { return t.num_labels > 1 && v >= static_cast<double>(t.num_labels); };
    if (std::any_of(pred.begin(), pred.end(), outside) || std::any_of(gold.begin(), gold.end(), outside))
      return;
    ++checked;
    const auto m = glue_metrics(t, pred, gold);
    EXPECT_EQ(m.size(), keys.size()) << task << " " << m.dump();
    for (const auto& [metric, fixture_key] : keys)
      expect_value(m.at(metric), c.at(fixture_key), name + " " + task + " " + metric);
  });
  return checked;
}

TEST(Metrics, GlueMetricSetsFromGoldenCases) {
  const std::vector<std::pair<std::string, std::string>> acc_f1{
      {"accuracy", "accuracy"}, {"f1", "f1"}, {"combined_score", "combined_score"}};
  EXPECT_GT(check_glue_metrics("labels", "pred", "gold", "mrpc", acc_f1), 10);
  EXPECT_GT(check_glue_metrics("labels", "pred", "gold", "qqp", acc_f1), 10);
  EXPECT_GT(check_glue_metrics("labels", "pred", "gold", "cola", {{"matthews_correlation", "matthews"}}), 10);
  EXPECT_GT(check_glue_metrics("labels", "pred", "gold", "sst2", {{"accuracy", "accuracy"}}), 10);
  EXPECT_GT(check_glue_metrics("correlations", "x", "y", "stsb",
                               {{"pearson", "pearson"}, {"spearmanr", "spearman"},
                                {"combined_score", "combined_score"}}),
            8);
}

TEST(Metrics, MnliThreeClassAccuracy) {
  const auto m = glue_metrics(data::glue_task("mnli"), {0, 1, 2, 2, 1}, {0, 1, 2, 0, 0});
  EXPECT_DOUBLE_EQ(m.at("accuracy").get<double>(), 0.6);
  EXPECT_EQ(m.size(), 1u);
}

TEST(Metrics, KeysOfEveryTaskAndPrimaryMetric) {
  for (const auto& t : data::glue_tasks()) {
    const bool reg = t.num_labels == 1;
    const std::vector<double> pred = reg ? std::vector<double>{0.5, 2, 4.5, 1} : std::vector<double>{0, 1, 1, 0};
    const std::vector<double> gold = reg ? std::vector<double>{1, 2, 4, 0.2} : std::vector<double>{0, 1, 0, 0};
    const auto m = glue_metrics(t, pred, gold);
    EXPECT_TRUE(m.contains(glue_primary_metric(t))) << t.name << ": " << m.dump();
  }
  EXPECT_EQ(glue_primary_metric(data::glue_task("cola")), "matthews_correlation");
  EXPECT_EQ(glue_primary_metric(data::glue_task("mrpc")), "combined_score");
  EXPECT_EQ(glue_primary_metric(data::glue_task("qqp")), "combined_score");
  EXPECT_EQ(glue_primary_metric(data::glue_task("stsb")), "combined_score");
  for (const char* n : {"sst2", "mnli", "qnli", "rte", "wnli"})
    EXPECT_EQ(glue_primary_metric(data::glue_task(n)), "accuracy") << n;
  EXPECT_EQ(glue_metrics(data::glue_task("qqp"), {1, 1}, {1, 0}).size(), 3u);
}

TEST(Metrics, NanPropagatesLikeScipy) {
  const double nan = std::nan("");
  EXPECT_TRUE(std::isnan(pearson({1, nan, 3}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(spearman({1, 2, 3}, {nan, 2, 3})));
  const auto m = glue_metrics(data::glue_task("stsb"), {2, 2, 2}, {1, 2, 3});
  EXPECT_TRUE(std::isnan(m.at("pearson").get<double>()));
  EXPECT_TRUE(std::isnan(m.at("combined_score").get<double>()));
}

TEST(Metrics, BadInputsAreErrors) {
  expect_error([] { accuracy({0, 1}, {0}); }, "2 predictions but 1 targets");
  expect_error([] { matthews_corrcoef({}, {}); }, "at least 1");
  expect_error([] { f1_binary({0, 2}, {0, 1}); }, "element 1 has prediction 2");
  expect_error([] { pearson({1}, {2}); }, "at least 2");
  expect_error([] { spearman({1, 2}, {2}); }, "2 predictions but 1 targets");
  const auto& rte = data::glue_task("rte");
  expect_error([&] { glue_metrics(rte, {0.7, 1}, {0, 1}); }, "predictions[0] = 0.7 is not a class id in [0, 2)");
  expect_error([&] { glue_metrics(rte, {0, 1}, {0, 2}); }, "gold[1] = 2");
  expect_error([&] { glue_metrics(data::glue_task("mnli"), {0, 3}, {0, 1}); }, "[0, 3)");
  expect_error([&] { glue_metrics(rte, {0, 1, 1}, {0, 1}); }, "3 predictions but 2 targets");
}

}  // namespace
}  // namespace lb::train
