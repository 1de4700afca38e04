// GLUE benchmark data: the nine tasks (names, label sets, official metric, splits), a reader
// for the original GLUE TSV files (the layout written by download_glue_data.py and read by
// the Hugging Face glue processors), and the TSV prediction files the GLUE server accepts.
//
// Files are tab-separated with no quoting (fields may contain '"'), UTF-8, LF or CRLF, with
// or without a final newline; a UTF-8 BOM at the start of a file is dropped. Where a file has
// a header, columns are found by name, so extra columns (MNLI's parses, STS-B's genre) are
// ignored. Every bad row is an lb::Error naming file:line, except QQP's rows with the wrong
// number of fields: those are skipped (see GlueSplit::skipped_lines), said on stderr with
// their count and first line numbers, and refused past kMaxSkippedRowsPercent of the rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lb::data {

// The most of a file's data rows that may be skipped as malformed (QQP), in percent; more
// is an error listing them.
constexpr int64_t kMaxSkippedRowsPercent = 1;

enum class GlueMetric { Matthews, Accuracy, AccuracyF1, PearsonSpearman };  // official metric per task

struct GlueTask {
  std::string name;                      // "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli" (HF run_glue names)
  std::string dir_name;                  // "CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"
  int64_t num_labels;                    // 1 for stsb (regression)
  std::vector<std::string> label_names;  // label-id order of HF datasets and the GLUE server; empty for stsb
  GlueMetric metric;
  bool is_pair;
  std::vector<std::string> dev_splits;   // {"dev"}; mnli: {"dev_matched", "dev_mismatched"}
  std::vector<std::string> test_splits;  // {"test"}; mnli: {"test_matched", "test_mismatched"}
  // The names of HF datasets' ClassLabel, in label-id order ("not_equivalent", "equivalent"),
  // where the GLUE server's are digits: what an exported model's id2label shows.
  std::vector<std::string> class_names;
  // GLUE-server file name of a test split ("CoLA.tsv", "MNLI-m.tsv", "MNLI-mm.tsv", ...);
  // any other split is an error listing the test splits.
  std::string submission_file(const std::string& split) const;
  // "train", then dev_splits, then test_splits: the splits read_glue accepts.
  std::vector<std::string> splits() const;
};

// The nine tasks in GLUE-paper order: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli.
const std::vector<GlueTask>& glue_tasks();
// Case-, '-' and '_'-insensitive: "sst2", "SST-2", "sst-2", "STS_B" all work. Unknown names
// are an error listing the valid ones.
const GlueTask& glue_task(const std::string& name);

struct GlueExample {
  int64_t index = 0;            // the file's index/id column where it has one, else the 0-based data row
  std::string text_a, text_b;   // text_b empty for single-sentence tasks
  bool has_label = false;
  int64_t label = -1;           // class id (classification)
  float score = 0;              // stsb target
  int64_t line = 0;             // 1-based line number in the file (for error messages)
};

struct GlueSplit {
  std::string task, split, path;
  std::vector<GlueExample> examples;
  bool labeled = false;  // every example has a label (train/dev; test splits of GLUE have none)
  // QQP only: 1-based lines skipped because their field count differs from the header's.
  // The original Quora release has a few such rows in train.tsv; Hugging Face's QqpProcessor
  // skips them too. Every other task treats such a row as an error. read_glue warns on
  // stderr about them and refuses more than kMaxSkippedRowsPercent of the data rows.
  std::vector<int64_t> skipped_lines;
};

// Reads <dir>/<split>.tsv (dir is the task's folder, e.g. .../glue/MRPC). split is one of
// task.splits(). Labels are required in train and dev splits and read in test splits only if
// the file has the label column. Errors name file:line: malformed row (wrong field count,
// invalid UTF-8, trailing blank lines excepted), unknown label (with the valid ones),
// non-numeric score or index, missing header column, and a missing file (with its path).
GlueSplit read_glue(const GlueTask& task, const std::string& dir, const std::string& split);

// GLUE-server submission <out_dir>/<task.submission_file(split)> (out_dir is created):
// header "index\tprediction", then one row per example in the given order. Classification
// predictions are class ids (integral doubles in [0, num_labels)) written as the label name
// the server expects (MNLI/QNLI/RTE: "entailment", ...; CoLA/SST-2/MRPC/QQP/WNLI: 0/1);
// STS-B scores are clipped to [0, 5] and written with 3 decimals. Duplicate indices, a size
// mismatch and NaN are errors. Written atomically.
void write_glue_submission(const GlueTask& task, const std::string& split,
                           const std::vector<int64_t>& indices,
                           const std::vector<double>& predictions, const std::string& out_dir);

}  // namespace lb::data
