// Evaluation metrics matching scikit-learn and SciPy (the values Hugging Face run_glue
// reports), and the official GLUE metric set of each task.
//
// Conventions, each checked against sklearn/scipy by tests/train/metrics_test.cpp:
//  - accuracy, f1_binary, matthews_corrcoef: non-empty, equal-length label vectors.
//  - f1_binary: positive class 1, labels must be 0/1. When F1 is undefined (no positive in
//    either vector, 2tp + fp + fn = 0) it is 0, which is sklearn's default
//    (zero_division="warn" returns 0 with a warning).
//  - matthews_corrcoef: any number of classes (sklearn's multiclass formula from the
//    confusion matrix); 0 when undefined (all predictions or all gold labels one class).
//  - pearson, spearman: at least 2 equal-length values; NaN when either input is constant
//    or holds a NaN, as scipy.stats.pearsonr / spearmanr return. spearman ranks ties by
//    their average rank.
//    (SciPy returns NaN for spearman on fewer than 2 values; here that is an error, like
//    pearsonr.)
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lb/data/glue.h"

namespace lb::train {

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double f1_binary(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double matthews_corrcoef(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold);
double pearson(const std::vector<double>& x, const std::vector<double>& y);
double spearman(const std::vector<double>& x, const std::vector<double>& y);

// The official metrics of a task under Hugging Face run_glue names (no "eval_" prefix):
//   cola {"matthews_correlation"}; sst2, mnli, qnli, rte, wnli {"accuracy"};
//   mrpc, qqp {"accuracy", "f1", "combined_score"};
//   stsb {"pearson", "spearmanr", "combined_score"}.
// combined_score is the mean of the other two, as run_glue computes it. Classification
// predictions and gold are class ids (argmax) given as integral doubles in [0, num_labels);
// stsb takes the raw scores. A NaN correlation (constant input) stays NaN in the JSON
// (nlohmann dumps it as null).
nlohmann::json glue_metrics(const data::GlueTask& task, const std::vector<double>& predictions,
                            const std::vector<double>& gold);

// The key of glue_metrics to maximise when choosing the best checkpoint: the task's GLUE
// score. GLUE scores a task with several metrics by their unweighted mean (the GLUE
// paper, Wang et al. 2019), so mrpc, qqp and stsb use "combined_score"; cola uses
// "matthews_correlation"; the rest "accuracy". Larger is better for all of them.
std::string glue_primary_metric(const data::GlueTask& task);

}  // namespace lb::train
