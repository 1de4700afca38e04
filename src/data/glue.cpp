// GLUE task table, TSV reader and GLUE-server submission writer (see glue.h). The column
// layouts follow the original GLUE files as the Hugging Face glue processors read them.
#include "lb/data/glue.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/io/printable.h"
#include "line_reader.h"

namespace lb::data {

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

// Column names of a task's files (header names; "" = not in this task's files). CoLA's
// train/dev files have no header and are described by kColaFixed instead.
struct Layout {
  const char* index;  // index/id column; absent in some files (then the row number is used)
  const char* text_a;
  const char* text_b;
  const char* label;
};

Layout layout_of(const std::string& task) {
  if (task == "cola") return {"index", "sentence", "", "label"};
  if (task == "sst2") return {"index", "sentence", "", "label"};
  if (task == "mrpc") return {"index", "#1 String", "#2 String", "Quality"};
  if (task == "stsb") return {"index", "sentence1", "sentence2", "score"};
  if (task == "qqp") return {"id", "question1", "question2", "is_duplicate"};
  if (task == "mnli") return {"index", "sentence1", "sentence2", "gold_label"};
  if (task == "qnli") return {"index", "question", "sentence", "label"};
  return {"index", "sentence1", "sentence2", "label"};  // rte, wnli
}

// Field positions of one file, from its header or (CoLA train/dev) fixed.
struct Columns {
  size_t num_fields = 0;
  int index = -1, text_a = -1, text_b = -1, label = -1;
};

// CoLA train/dev: source, label, original judgement (blank), sentence; no header.
constexpr Columns kColaFixed{4, -1, 3, -1, 1};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t tab = line.find('\t', start);
    out.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

Columns columns_from_header(const std::vector<std::string>& header, const Layout& layout,
                            const GlueTask& task, bool label_required, const std::string& path) {
  Columns c;
  c.num_fields = header.size();
  auto find = [&](const char* name, bool required) {
    if (!*name) return -1;
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      LB_CHECK(!required, path, ":1: header has no column '", name, "' (columns: ",
               io::printable(join(header)), "); expected the GLUE ", task.dir_name, " layout");
      return -1;
    }
    LB_CHECK(std::find(it + 1, header.end(), name) == header.end(), path, ":1: column '", name,
             "' appears twice in the header");
    return static_cast<int>(it - header.begin());
  };
  c.index = find(layout.index, false);
  c.text_a = find(layout.text_a, true);
  c.text_b = find(layout.text_b, true);
  c.label = find(layout.label, label_required);
  return c;
}

int64_t parse_index(const std::string& s, const std::string& where) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  LB_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty(), where,
           ": index '", io::printable(s), "' is not an integer");
  return v;
}

float parse_score(const std::string& s, const std::string& where) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  LB_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty() && std::isfinite(v),
           where, ": score '", io::printable(s), "' is not a finite number");
  return static_cast<float>(v);
}

int64_t parse_label(const GlueTask& task, const std::string& s, const std::string& where) {
  const auto& names = task.label_names;
  const auto it = std::find(names.begin(), names.end(), s);
  LB_CHECK(it != names.end(), where, ": unknown ", task.name, " label '", io::printable(s), "'; valid: ",
           join(names));
  return it - names.begin();
}

std::string canonical_name(const std::string& name) {
  std::string out;
  for (char ch : name)
    if (ch != '-' && ch != '_')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// "3, 17, 20, 31, 44, ..." : the first few of `lines`.
std::string first_lines(const std::vector<int64_t>& lines, size_t shown = 5) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < shown; ++i) out += (i ? ", " : "") + std::to_string(lines[i]);
  if (lines.size() > shown) out += ", ...";
  return out;
}

// Rows skipped for a wrong field count (QQP) are said on stderr, and refused past
// kMaxSkippedRowsPercent of the data rows: a few are the original release's quirks, many
// mean a broken file that would otherwise train on what is left without a word.
void report_skipped_rows(const GlueSplit& s, int64_t expected_fields) {
  if (s.skipped_lines.empty()) return;
  const auto skipped = static_cast<int64_t>(s.skipped_lines.size());
  const int64_t rows = skipped + static_cast<int64_t>(s.examples.size());
  const std::string what = std::to_string(skipped) + " of " + std::to_string(rows) +
                           " data rows with a tab-separated field count other than the header's " +
                           std::to_string(expected_fields) + " (lines " + first_lines(s.skipped_lines) + ")";
  LB_CHECK(skipped * 100 <= rows * kMaxSkippedRowsPercent, s.path, ": ", what, " are more than ",
           kMaxSkippedRowsPercent, "% of the rows, so the file looks broken, not quirky (HINT: check its "
           "tabs and line breaks against the GLUE download)");
  std::cerr << "leanback: warning: " << s.path << ": skipped " << what << "\n";
}

std::vector<GlueTask> make_tasks() {
  using M = GlueMetric;
  const std::vector<std::string> bin{"0", "1"}, nli2{"entailment", "not_entailment"};
  const std::vector<std::string> dev{"dev"}, test{"test"};
  return {
      {"cola", "CoLA", 2, bin, M::Matthews, false, dev, test, {"unacceptable", "acceptable"}},
      {"sst2", "SST-2", 2, bin, M::Accuracy, false, dev, test, {"negative", "positive"}},
      {"mrpc", "MRPC", 2, bin, M::AccuracyF1, true, dev, test, {"not_equivalent", "equivalent"}},
      {"stsb", "STS-B", 1, {}, M::PearsonSpearman, true, dev, test, {}},
      {"qqp", "QQP", 2, bin, M::AccuracyF1, true, dev, test, {"not_duplicate", "duplicate"}},
      {"mnli", "MNLI", 3, {"entailment", "neutral", "contradiction"}, M::Accuracy, true,
       {"dev_matched", "dev_mismatched"}, {"test_matched", "test_mismatched"}, {"entailment", "neutral", "contradiction"}},
      {"qnli", "QNLI", 2, nli2, M::Accuracy, true, dev, test, nli2},
      {"rte", "RTE", 2, nli2, M::Accuracy, true, dev, test, nli2},
      {"wnli", "WNLI", 2, bin, M::Accuracy, true, dev, test, {"not_entailment", "entailment"}},
  };
}

}  // namespace

std::vector<std::string> GlueTask::splits() const {
  std::vector<std::string> out{"train"};
  out.insert(out.end(), dev_splits.begin(), dev_splits.end());
  out.insert(out.end(), test_splits.begin(), test_splits.end());
  return out;
}

std::string GlueTask::submission_file(const std::string& split) const {
  LB_CHECK(std::find(test_splits.begin(), test_splits.end(), split) != test_splits.end(),
           "GLUE ", name, ": no submission file for split '", split,
           "'; the GLUE server takes the test splits: ", join(test_splits));
  if (name == "mnli") return split == "test_matched" ? "MNLI-m.tsv" : "MNLI-mm.tsv";
  return dir_name + ".tsv";
}

const std::vector<GlueTask>& glue_tasks() {
  static const std::vector<GlueTask> tasks = make_tasks();
  return tasks;
}

const GlueTask& glue_task(const std::string& name) {
  const std::string key = canonical_name(name);
  std::vector<std::string> valid;
  for (const auto& t : glue_tasks()) {
    if (t.name == key) return t;
    valid.push_back(t.name);
  }
  LB_FAIL("unknown GLUE task '", name, "'; valid: ", join(valid),
          " (case, '-' and '_' are ignored, so 'SST-2' is sst2)");
}

GlueSplit read_glue(const GlueTask& task, const std::string& dir, const std::string& split) {
  const auto splits = task.splits();
  LB_CHECK(std::find(splits.begin(), splits.end(), split) != splits.end(), "GLUE ", task.name,
           ": unknown split '", split, "'; valid: ", join(splits));
  GlueSplit out;
  out.task = task.name;
  out.split = split;
  out.path = (std::filesystem::path(dir) / (split + ".tsv")).string();
  const std::string& path = out.path;
  std::error_code ec;
  LB_CHECK(std::filesystem::is_regular_file(path, ec), "GLUE ", task.name, " ", split,
           ": no file ", path,
           " (HINT: dir should be the task's folder of the GLUE download, e.g. glue_data/",
           task.dir_name, ")");
  LineReader reader(path);
  LB_CHECK(reader.is_open(), "GLUE ", task.name, " ", split, ": cannot open ", path);

  const bool is_test = std::find(task.test_splits.begin(), task.test_splits.end(), split) !=
                       task.test_splits.end();
  const bool headerless = task.name == "cola" && !is_test;
  std::string line;
  Columns cols;
  if (headerless) {
    cols = kColaFixed;
  } else {
    LB_CHECK(reader.next(line), path, ": empty file; expected a header line (GLUE ",
             task.dir_name, " layout)");
    cols = columns_from_header(split_tabs(line), layout_of(task.name), task, !is_test, path);
  }
  out.labeled = cols.label >= 0;
  const bool skip_bad_rows = task.name == "qqp";
  const int64_t header_lines = headerless ? 0 : 1;
  int64_t first_blank = 0;  // a blank line is fine only if nothing but blank lines follows
  while (reader.next(line)) {
    const int64_t line_no = reader.line_no();
    if (line.empty()) {
      if (!first_blank) first_blank = line_no;
      continue;
    }
    const std::string where = path + ":" + std::to_string(line_no);
    LB_CHECK(!first_blank, path, ":", first_blank, ": blank line inside the data");
    const auto f = split_tabs(line);
    if (f.size() != cols.num_fields) {
      if (skip_bad_rows) {
        out.skipped_lines.push_back(line_no);
        continue;
      }
      LB_FAIL(where, ": malformed row: ", f.size(), " tab-separated fields, expected ",
              cols.num_fields,
              headerless ? " (CoLA: source, label, blank, sentence)" : " (as the header)");
    }
    GlueExample ex;
    ex.line = line_no;
    ex.index = cols.index >= 0 ? parse_index(f[cols.index], where) : line_no - header_lines - 1;
    ex.text_a = f[cols.text_a];
    if (cols.text_b >= 0) ex.text_b = f[cols.text_b];
    if (cols.label >= 0) {
      ex.has_label = true;
      if (task.num_labels == 1) ex.score = parse_score(f[cols.label], where);
      else ex.label = parse_label(task, f[cols.label], where);
    }
    out.examples.push_back(std::move(ex));
  }
  report_skipped_rows(out, static_cast<int64_t>(cols.num_fields));
  LB_CHECK(!out.examples.empty(), path, ": no data rows");
  return out;
}

void write_glue_submission(const GlueTask& task, const std::string& split,
                           const std::vector<int64_t>& indices,
                           const std::vector<double>& predictions, const std::string& out_dir) {
  const std::string file = task.submission_file(split);
  LB_CHECK(indices.size() == predictions.size(), "GLUE ", task.name, " submission: ",
           indices.size(), " indices but ", predictions.size(), " predictions");
  std::set<int64_t> seen;
  std::string text = "index\tprediction\n";
  char buf[64];
  for (size_t i = 0; i < indices.size(); ++i) {
    const double p = predictions[i];
    LB_CHECK(seen.insert(indices[i]).second, "GLUE ", task.name, " submission: index ",
             indices[i], " appears twice (row ", i, ")");
    LB_CHECK(!std::isnan(p), "GLUE ", task.name, " submission: prediction ", i, " (index ",
             indices[i], ") is NaN");
    text += std::to_string(indices[i]) + '\t';
    if (task.num_labels == 1) {
      // The server scores STS-B in [0, 5]; "+ 0.0" turns a clamped -0.0 into 0.
      std::snprintf(buf, sizeof buf, "%.3f", std::clamp(p, 0.0, 5.0) + 0.0);
      text += buf;
    } else {
      LB_CHECK(p == std::floor(p) && p >= 0 && p < static_cast<double>(task.num_labels), "GLUE ",
               task.name, " submission: prediction ", i, " (index ", indices[i], ") is ", p,
               ", not a class id in [0, ", task.num_labels, ")");
      text += task.label_names[static_cast<size_t>(p)];
    }
    text += '\n';
  }
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  LB_CHECK(std::filesystem::is_directory(out_dir), "GLUE submission: cannot create directory ",
           out_dir, ": ", ec.message());
  io::write_text_atomic((std::filesystem::path(out_dir) / file).string(), text);
}

}  // namespace lb::data
