// Classification and correlation metrics, and the GLUE metric sets (see metrics.h). The
// formulas follow sklearn.metrics and scipy.stats step by step so the values agree to
// rounding (tests/train/metrics_test.cpp checks 1e-12 against their outputs).
#include "lb/train/report/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "lb/core/error.h"

namespace lb::train {

namespace {

template <typename T>
void check_pair(const char* what, const std::vector<T>& a, const std::vector<T>& b, size_t min_n) {
  LB_CHECK(a.size() == b.size(), what, ": ", a.size(), " predictions but ", b.size(), " targets");
  LB_CHECK(a.size() >= min_n, what, ": needs at least ", min_n, " values, got ", a.size());
}

bool has_nan(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

bool is_constant(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; });
}

// x - mean(x) and its 2-norm, scaled by max|x - mean| first so large values do not overflow
// (as scipy.stats.pearsonr does).
double centered(const std::vector<double>& x, std::vector<double>& xm) {
  const double mean = std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
  xm.resize(x.size());
  double scale = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xm[i] = x[i] - mean;
    scale = std::max(scale, std::abs(xm[i]));
  }
  double ss = 0;
  for (double v : xm) ss += (v / scale) * (v / scale);
  return scale * std::sqrt(ss);
}

// Pearson's r of non-constant, NaN-free inputs, clipped to [-1, 1].
double pearson_core(const std::vector<double>& x, const std::vector<double>& y) {
  std::vector<double> xm, ym;
  const double nx = centered(x, xm), ny = centered(y, ym);
  double r = 0;
  for (size_t i = 0; i < x.size(); ++i) r += (xm[i] / nx) * (ym[i] / ny);
  return std::clamp(r, -1.0, 1.0);
}

// 1-based ranks, ties sharing their average rank (scipy.stats.rankdata method="average").
std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && x[order[j]] == x[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + 1 + j);  // mean of i+1 .. j
    for (size_t k = i; k < j; ++k) ranks[order[k]] = rank;
    i = j;
  }
  return ranks;
}

// Class ids from integral doubles in [0, num_labels).
std::vector<int64_t> class_ids(const data::GlueTask& task, const std::vector<double>& v,
                               const char* what) {
  std::vector<int64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    LB_CHECK(v[i] == std::floor(v[i]) && v[i] >= 0 && v[i] < static_cast<double>(task.num_labels),
             "glue_metrics(", task.name, "): ", what, "[", i, "] = ", v[i],
             " is not a class id in [0, ", task.num_labels,
             ") (HINT: pass argmax ids, not logits)");
    out[i] = static_cast<int64_t>(v[i]);
  }
  return out;
}

}  // namespace

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair("accuracy", pred, gold, 1);
  size_t correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) correct += pred[i] == gold[i];
  return static_cast<double>(correct) / static_cast<double>(pred.size());
}

double f1_binary(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair("f1_binary", pred, gold, 1);
  int64_t tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    LB_CHECK((pred[i] == 0 || pred[i] == 1) && (gold[i] == 0 || gold[i] == 1),
             "f1_binary: labels must be 0 or 1; element ", i, " has prediction ", pred[i],
             " and target ", gold[i]);
    tp += pred[i] == 1 && gold[i] == 1;
    fp += pred[i] == 1 && gold[i] == 0;
    fn += pred[i] == 0 && gold[i] == 1;
  }
  // 2tp / (2tp + fp + fn) equals 2PR / (P + R); sklearn's zero_division default gives 0.
  const int64_t denom = 2 * tp + fp + fn;
  return denom == 0 ? 0.0 : 2.0 * static_cast<double>(tp) / static_cast<double>(denom);
}

double matthews_corrcoef(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair("matthews_corrcoef", pred, gold, 1);
  // Per-class gold (t) and predicted (p) counts: the confusion matrix's row and column sums.
  std::map<int64_t, std::pair<double, double>> counts;
  double n_correct = 0;
  for (size_t i = 0; i < pred.size(); ++i) {
    counts[gold[i]].first += 1;
    counts[pred[i]].second += 1;
    n_correct += pred[i] == gold[i];
  }
  const double n = static_cast<double>(pred.size());
  double tp = 0, pp = 0, tt = 0;
  for (const auto& [label, c] : counts) {
    tp += c.first * c.second;
    pp += c.second * c.second;
    tt += c.first * c.first;
  }
  const double cov_ytyp = n_correct * n - tp, cov_ypyp = n * n - pp, cov_ytyt = n * n - tt;
  const double denom = cov_ypyp * cov_ytyt;
  return denom == 0 ? 0.0 : cov_ytyp / std::sqrt(denom);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair("pearson", x, y, 2);
  if (has_nan(x) || has_nan(y) || is_constant(x) || is_constant(y))
    return std::numeric_limits<double>::quiet_NaN();
  return pearson_core(x, y);
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair("spearman", x, y, 2);
  if (has_nan(x) || has_nan(y) || is_constant(x) || is_constant(y))
    return std::numeric_limits<double>::quiet_NaN();
  return pearson_core(average_ranks(x), average_ranks(y));
}

nlohmann::json glue_metrics(const data::GlueTask& task, const std::vector<double>& predictions,
                            const std::vector<double>& gold) {
  nlohmann::json out = nlohmann::json::object();
  if (task.metric == data::GlueMetric::PearsonSpearman) {
    const double p = pearson(predictions, gold), s = spearman(predictions, gold);
    out["pearson"] = p;
    out["spearmanr"] = s;
    out["combined_score"] = (p + s) / 2;
    return out;
  }
  check_pair(task.name.c_str(), predictions, gold, 1);
  const auto pred = class_ids(task, predictions, "predictions");
  const auto ids = class_ids(task, gold, "gold");
  switch (task.metric) {
    case data::GlueMetric::Matthews:
      out["matthews_correlation"] = matthews_corrcoef(pred, ids);
      break;
    case data::GlueMetric::Accuracy:
      out["accuracy"] = accuracy(pred, ids);
      break;
    case data::GlueMetric::AccuracyF1: {
      const double acc = accuracy(pred, ids), f1 = f1_binary(pred, ids);
      out["accuracy"] = acc;
      out["f1"] = f1;
      out["combined_score"] = (acc + f1) / 2;
      break;
    }
    case data::GlueMetric::PearsonSpearman:
      break;  // handled above
  }
  return out;
}

std::string glue_primary_metric(const data::GlueTask& task) {
  switch (task.metric) {
    case data::GlueMetric::Matthews: return "matthews_correlation";
    case data::GlueMetric::Accuracy: return "accuracy";
    case data::GlueMetric::AccuracyF1:
    case data::GlueMetric::PearsonSpearman: return "combined_score";
  }
  LB_FAIL("glue_primary_metric: unknown metric kind for task ", task.name);
}

}  // namespace lb::train
