// GLUE: the task table, the TSV reader on the real files (row counts and label counts from
// shared/data/glue/SOURCES.md; skipped when the data is absent) and on small files written
// here in each task's exact layout, every reader error, and GLUE-server submission files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "lb/core/error.h"
#include "lb/data/glue.h"
#include "testing/testing.h"

namespace lb::data {
namespace {

namespace fs = std::filesystem;

template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_ERROR(stmt, needle) \
  EXPECT_NE(error_of([&] { stmt; }).find(needle), std::string::npos) << error_of([&] { stmt; })

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// --- task table ---------------------------------------------------------------------------

TEST(GlueTasks, TableMatchesGlue) {
  const auto& tasks = glue_tasks();
  ASSERT_EQ(tasks.size(), 9u);
  const std::vector<std::string> names{"cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli"};
  const std::vector<std::string> dirs{"CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"};
  for (size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_EQ(tasks[i].name, names[i]);
    EXPECT_EQ(tasks[i].dir_name, dirs[i]);
    EXPECT_EQ(static_cast<int64_t>(tasks[i].label_names.size()),
              tasks[i].num_labels == 1 ? 0 : tasks[i].num_labels) << names[i];
  }
  const auto& mnli = glue_task("mnli");
  EXPECT_EQ(mnli.label_names, (std::vector<std::string>{"entailment", "neutral", "contradiction"}));
  EXPECT_EQ(mnli.dev_splits, (std::vector<std::string>{"dev_matched", "dev_mismatched"}));
  EXPECT_EQ(mnli.test_splits, (std::vector<std::string>{"test_matched", "test_mismatched"}));
  EXPECT_EQ(mnli.submission_file("test_matched"), "MNLI-m.tsv");
  EXPECT_EQ(mnli.submission_file("test_mismatched"), "MNLI-mm.tsv");
  EXPECT_EQ(glue_task("rte").label_names, (std::vector<std::string>{"entailment", "not_entailment"}));
  EXPECT_EQ(glue_task("qnli").label_names, glue_task("rte").label_names);
  for (const char* n : {"cola", "sst2", "mrpc", "qqp", "wnli"})
    EXPECT_EQ(glue_task(n).label_names, (std::vector<std::string>{"0", "1"})) << n;
  const auto& stsb = glue_task("stsb");
  EXPECT_EQ(stsb.num_labels, 1);
  EXPECT_EQ(stsb.metric, GlueMetric::PearsonSpearman);
  EXPECT_EQ(glue_task("cola").metric, GlueMetric::Matthews);
  EXPECT_EQ(glue_task("mrpc").metric, GlueMetric::AccuracyF1);
  EXPECT_EQ(glue_task("qqp").metric, GlueMetric::AccuracyF1);
  EXPECT_EQ(glue_task("sst2").metric, GlueMetric::Accuracy);
  EXPECT_FALSE(glue_task("cola").is_pair);
  EXPECT_FALSE(glue_task("sst2").is_pair);
  EXPECT_TRUE(glue_task("mrpc").is_pair);
  EXPECT_TRUE(glue_task("wnli").is_pair);
  EXPECT_EQ(glue_task("sst2").submission_file("test"), "SST-2.tsv");
  EXPECT_EQ(glue_task("stsb").submission_file("test"), "STS-B.tsv");
  EXPECT_EQ(glue_task("cola").splits(), (std::vector<std::string>{"train", "dev", "test"}));
}

TEST(GlueTasks, LookupIgnoresCaseDashesUnderscores) {
  EXPECT_EQ(glue_task("SST-2").name, "sst2");
  EXPECT_EQ(glue_task("sst-2").name, "sst2");
  EXPECT_EQ(glue_task("STS_B").name, "stsb");
  EXPECT_EQ(glue_task("CoLA").name, "cola");
  EXPECT_EQ(&glue_task("MNLI"), &glue_task("mnli"));
  EXPECT_ERROR(glue_task("squad"),
               "unknown GLUE task 'squad'; valid: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli");
  EXPECT_ERROR(glue_task("rte").submission_file("dev"),
               "no submission file for split 'dev'; the GLUE server takes the test splits: test");
}

// --- the real files -----------------------------------------------------------------------

class GlueRealData : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = lb::testing::shared_data_dir();
    if (root.empty()) GTEST_SKIP() << "no shared/data";
    glue_ = fs::path(root) / "glue";
    if (!fs::is_directory(glue_)) GTEST_SKIP() << "no shared/data/glue";
  }
  GlueSplit read(const std::string& task, const std::string& split) {
    const GlueTask& t = glue_task(task);
    return read_glue(t, (glue_ / t.dir_name).string(), split);
  }
  fs::path glue_;
};

std::map<int64_t, int64_t> label_counts(const GlueSplit& s) {
  std::map<int64_t, int64_t> c;
  for (const auto& e : s.examples) ++c[e.label];
  return c;
}

TEST_F(GlueRealData, RowCountsAndLabelsOfEveryFile) {
  // Rows per SOURCES.md; every train/dev row labeled, no test row.
  const std::map<std::string, std::vector<size_t>> rows{
      {"cola", {8551, 1043, 1063}}, {"sst2", {67349, 872, 1821}}, {"mrpc", {3668, 408, 1725}},
      {"stsb", {5749, 1500, 1379}}, {"rte", {2490, 277, 3000}},   {"wnli", {635, 71, 146}}};
  for (const auto& [task, counts] : rows) {
    const std::vector<std::string> splits{"train", "dev", "test"};
    for (size_t i = 0; i < 3; ++i) {
      ::testing::internal::CaptureStderr();
      const GlueSplit s = read(task, splits[i]);
      // No row of the real files is skipped or warned about.
      EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << task << " " << splits[i];
      EXPECT_EQ(s.examples.size(), counts[i]) << task << " " << splits[i];
      const bool labeled = splits[i] != "test";
      EXPECT_EQ(s.labeled, labeled) << task << " " << splits[i];
      EXPECT_TRUE(s.skipped_lines.empty());
      for (size_t k = 0; k < s.examples.size(); ++k) {
        const auto& e = s.examples[k];
        ASSERT_EQ(e.has_label, labeled) << s.path << ":" << e.line;
        // GLUE's index columns count rows from 0, so they equal the row number.
        ASSERT_EQ(e.index, static_cast<int64_t>(k)) << s.path << ":" << e.line;
        ASSERT_EQ(e.line, static_cast<int64_t>(k) + (task == "cola" && labeled ? 1 : 2));
        ASSERT_FALSE(e.text_a.empty()) << s.path << ":" << e.line;
        ASSERT_EQ(e.text_b.empty(), !glue_task(task).is_pair) << s.path << ":" << e.line;
        if (labeled && task != "stsb") ASSERT_TRUE(e.label >= 0 && e.label < 2);
        if (labeled && task == "stsb") ASSERT_TRUE(e.score >= 0 && e.score <= 5);
      }
    }
  }
}

TEST_F(GlueRealData, LabelDistributionsMatchPublished) {
  EXPECT_EQ(label_counts(read("sst2", "train")), (std::map<int64_t, int64_t>{{0, 29780}, {1, 37569}}));
  EXPECT_EQ(label_counts(read("cola", "train")), (std::map<int64_t, int64_t>{{0, 2528}, {1, 6023}}));
  EXPECT_EQ(label_counts(read("cola", "dev")), (std::map<int64_t, int64_t>{{0, 322}, {1, 721}}));
  EXPECT_EQ(label_counts(read("rte", "dev")), (std::map<int64_t, int64_t>{{0, 146}, {1, 131}}));
  EXPECT_EQ(label_counts(read("wnli", "dev")), (std::map<int64_t, int64_t>{{0, 40}, {1, 31}}));
  EXPECT_EQ(label_counts(read("mrpc", "train")), (std::map<int64_t, int64_t>{{0, 1194}, {1, 2474}}));
  EXPECT_EQ(label_counts(read("mrpc", "dev")), (std::map<int64_t, int64_t>{{0, 129}, {1, 279}}));
}

TEST_F(GlueRealData, FirstAndLastExamples) {
  const auto cola = read("cola", "train");
  EXPECT_EQ(cola.examples.front().text_a, "Our friends won't buy this analysis, let alone the next one we propose.");
  EXPECT_EQ(cola.examples.back().text_a, "What all did you get for Christmas?");
  EXPECT_EQ(cola.examples.back().label, 1);
  EXPECT_EQ(cola.examples.back().line, 8551);
  // CoLA dev has no newline after its last row.
  EXPECT_EQ(read("cola", "dev").examples.back().text_a, "John talked to Bill about himself.");
  const auto cola_test = read("cola", "test");
  EXPECT_EQ(cola_test.examples.back().index, 1062);
  EXPECT_EQ(cola_test.examples.back().text_a, "A picture of himself frightened John.");

  // SST-2 sentences keep their trailing space (as HF's processor does).
  const auto sst = read("sst2", "train");
  EXPECT_EQ(sst.examples.front().text_a, "hide new secretions from the parental units ");
  EXPECT_EQ(sst.examples.front().label, 0);

  // MRPC: the BOM is not part of the Quality column name; '"' is plain text.
  const auto mrpc = read("mrpc", "train");
  EXPECT_EQ(mrpc.examples.front().label, 1);
  EXPECT_EQ(mrpc.examples.front().text_a,
            "Amrozi accused his brother , whom he called \" the witness \" , of deliberately distorting his evidence .");
  EXPECT_EQ(mrpc.examples.front().text_b,
            "Referring to him as only \" the witness \" , Amrozi accused his brother of deliberately distorting his evidence .");
  EXPECT_EQ(mrpc.examples.back().label, 0);
  EXPECT_EQ(read("mrpc", "test").examples.back().index, 1724);

  const auto stsb = read("stsb", "train");
  EXPECT_EQ(stsb.examples.front().text_a, "A plane is taking off.");
  EXPECT_EQ(stsb.examples.front().text_b, "An air plane is taking off.");
  EXPECT_FLOAT_EQ(stsb.examples.front().score, 5.0f);
  EXPECT_EQ(stsb.examples.back().text_a, "Putin spokesman: Doping charges appear unfounded");
  EXPECT_FLOAT_EQ(stsb.examples.back().score, 0.0f);
  EXPECT_FLOAT_EQ(stsb.examples[1].score, 3.8f);
  double sum = 0;
  for (const auto& e : read("stsb", "dev").examples) sum += e.score;
  EXPECT_NEAR(sum, 3545.861333, 1e-3);

  const auto rte = read("rte", "dev");
  EXPECT_EQ(rte.examples.front().text_b, "Christopher Reeve had an accident.");
  EXPECT_EQ(rte.examples.front().label, 1);  // not_entailment
  EXPECT_EQ(read("rte", "test").examples.back().text_b, "26 people died in an airplane crash.");

  const auto wnli = read("wnli", "train");
  EXPECT_EQ(wnli.examples.back().text_b, "Sally had such a bad start.");
  EXPECT_EQ(wnli.examples.back().index, 634);
  EXPECT_EQ(wnli.examples.back().label, 1);
}

TEST_F(GlueRealData, SubmissionOfARealTestSplit) {
  const auto test = read("rte", "test");
  std::vector<int64_t> idx;
  std::vector<double> pred;
  for (const auto& e : test.examples) {
    idx.push_back(e.index);
    pred.push_back(static_cast<double>(e.index % 2));
  }
  const fs::path out = fs::temp_directory_path() / ("lb_glue_sub_" + std::to_string(::getpid()));
  write_glue_submission(glue_task("rte"), "test", idx, pred, out.string());
  const std::string text = read_text(out / "RTE.tsv");
  fs::remove_all(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3001);
  EXPECT_EQ(text.rfind("index\tprediction\n0\tentailment\n1\tnot_entailment\n", 0), 0u);
  EXPECT_NE(text.find("\n2999\tnot_entailment\n"), std::string::npos);
}

// --- generated files in each layout --------------------------------------------------------

class GlueFiles : public ::testing::Test {
 protected:
  lb::testing::TempDir tmp_{"lb_glue"};
  const fs::path& dir_ = tmp_.path();
  // Writes dir_/<split>.tsv with the exact bytes given.
  void write(const std::string& split, const std::string& bytes) {
    std::ofstream(dir_ / (split + ".tsv"), std::ios::binary) << bytes;
  }
  GlueSplit read(const std::string& task, const std::string& split) {
    return read_glue(glue_task(task), dir_.string(), split);
  }
  std::string path(const std::string& split) const { return (dir_ / (split + ".tsv")).string(); }
};

// A QQP train file of n data rows; those on the lines `truncated` picks lack their second
// question and label, as a few rows of Quora's release do.
std::string qqp_rows(int64_t n, const std::function<bool(int64_t)>& truncated) {
  std::string text = "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n";
  for (int64_t i = 0; i < n; ++i) {
    const int64_t line = i + 2;
    text += std::to_string(100 + i) + "\t1\t2\tHow do I control my horny emotions?";
    text += truncated(line) ? "\n" : "\tWhat can cause stool to come out as little balls?\t" + std::to_string(i % 2) + "\n";
  }
  return text;
}

TEST_F(GlueFiles, QqpWithMalformedRowsSkipped) {
  const std::string more = qqp_rows(97, [](int64_t) { return false; });
  write("train",
        "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
        "133273\t213221\t213222\tHow is the life of a math student?\tWhich level of prepration is enough?\t0\n"
        "402555\t536040\t536041\tHow do I control my horny emotions?\n"  // truncated, as in Quora's release
        "360472\t364011\t490273\tWhat causes stool color to change?\tWhat can cause stool to come out as little balls?\t1\n" +
            more.substr(more.find('\n') + 1));
  ::testing::internal::CaptureStderr();
  const auto s = read("qqp", "train");
  const std::string warning = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(s.examples.size(), 99u);
  EXPECT_TRUE(s.labeled);
  EXPECT_EQ(s.skipped_lines, (std::vector<int64_t>{3}));
  EXPECT_EQ(s.examples[0].index, 133273);
  EXPECT_EQ(s.examples[0].text_b, "Which level of prepration is enough?");
  EXPECT_EQ(s.examples[1].label, 1);
  EXPECT_EQ(s.examples[1].line, 4);
  // Skipping is said, naming the file, the count and the line.
  EXPECT_NE(warning.find("warning: " + path("train") +
                         ": skipped 1 of 100 data rows with a tab-separated field count other than the "
                         "header's 6 (lines 3)"),
            std::string::npos)
      << warning;
  write("test", "id\tquestion1\tquestion2\n0\tWhy am I mentally very lonely?\tFind the remainder when 23^24 is divided by 24,23?\n");
  const auto t = read("qqp", "test");
  EXPECT_FALSE(t.labeled);
  ASSERT_EQ(t.examples.size(), 1u);
  EXPECT_FALSE(t.examples[0].has_label);
  EXPECT_EQ(t.examples[0].text_a, "Why am I mentally very lonely?");
  // A dev split must have its label column.
  write("dev", "id\tquestion1\tquestion2\n0\ta\tb\n");
  EXPECT_ERROR(read("qqp", "dev"), path("dev") + ":1: header has no column 'is_duplicate'");
}

// Half of QQP's rows malformed trained on the other half without a word; past 1% of the
// data rows it is an error listing the first lines.
TEST_F(GlueFiles, QqpRefusesMoreThanOnePercentMalformedRows) {
  write("train", qqp_rows(100, [](int64_t line) { return line % 2 == 1; }));
  EXPECT_ERROR(read("qqp", "train"), path("train") + ": 50 of 100 data rows with a tab-separated field count other "
                                     "than the header's 6 (lines 3, 5, 7, 9, 11, ...) are more than 1% of the rows");
  write("train", qqp_rows(100, [](int64_t line) { return line == 50 || line == 90; }));
  EXPECT_ERROR(read("qqp", "train"), "2 of 100 data rows with a tab-separated field count other than the header's 6 "
                                     "(lines 50, 90) are more than 1% of the rows");
  // 1% passes, with the warning; a clean file says nothing.
  write("train", qqp_rows(200, [](int64_t line) { return line == 50 || line == 90; }));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(read("qqp", "train").examples.size(), 198u);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("skipped 2 of 200 data rows"), std::string::npos);
  write("train", qqp_rows(10, [](int64_t) { return false; }));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(read("qqp", "train").examples.size(), 10u);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(GlueFiles, MnliColumnsByName) {
  const std::string parses = "( A )\t( B )\t(ROOT A)\t(ROOT B)\t";
  write("train",
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
        "0\t31193\t31193n\tgovernment\t" + parses + "Conceptually cream skimming has two basic dimensions.\tProduct and geography are what make cream skimming work. \tneutral\tneutral\n"
        "1\t101457\t101457e\ttelephone\t" + parses + "you know during the season\tYou lose the things to the following level.\tentailment\tentailment\n"
        "2\t134793\t134793c\tfiction\t" + parses + "One of our number will carry out your instructions.\tA member of my team will execute your orders.\tentailment\tcontradiction\n");
  const auto tr = read("mnli", "train");
  ASSERT_EQ(tr.examples.size(), 3u);
  EXPECT_EQ(tr.examples[0].text_b, "Product and geography are what make cream skimming work. ");
  EXPECT_EQ(tr.examples[0].label, 1);  // neutral
  EXPECT_EQ(tr.examples[1].label, 0);  // entailment
  EXPECT_EQ(tr.examples[2].label, 2);  // gold_label, not label1
  const std::string dev_header =
      "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n";
  write("dev_matched", dev_header + "0\t63735\t63735n\tslate\t" + parses +
                           "The new rights are nice enough\tEveryone really likes the newest benefits \tneutral\tentailment\tneutral\tneutral\tneutral\tneutral\n");
  write("dev_mismatched", dev_header + "7\t75\t75c\tletters\t" + parses +
                              "Your gift is appreciated.\tHundreds of students will benefit.\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\tcontradiction\n");
  EXPECT_EQ(read("mnli", "dev_matched").examples.at(0).label, 1);
  const auto mm = read("mnli", "dev_mismatched");
  EXPECT_EQ(mm.examples.at(0).label, 2);
  EXPECT_EQ(mm.examples.at(0).index, 7);
  write("test_matched",
        "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\n"
        "0\t31493\t31493\ttravel\t" + parses + "Hierbas, ans seco, ans dulce, and frigola.\tThe drinks are not cheap.\n");
  const auto tm = read("mnli", "test_matched");
  EXPECT_FALSE(tm.labeled);
  EXPECT_EQ(tm.examples.at(0).text_b, "The drinks are not cheap.");
  write("test_mismatched", "");
  EXPECT_ERROR(read("mnli", "test_mismatched"), path("test_mismatched") + ": empty file");
  EXPECT_ERROR(read("mnli", "dev"), "unknown split 'dev'; valid: train, dev_matched, dev_mismatched, test_matched, test_mismatched");
}

TEST_F(GlueFiles, QnliLayout) {
  write("dev",
        "index\tquestion\tsentence\tlabel\n"
        "0\tWhat came into force after the new constitution was herald?\tAs of that day, the new constitution heralding the Second Republic came into force.\tentailment\n"
        "1\tWhat is the first major city in the stream of the Rhine?\tThe most important tributaries in this area are the Ill below of Strasbourg.\tnot_entailment\n");
  const auto d = read("qnli", "dev");
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.examples[0].label, 0);
  EXPECT_EQ(d.examples[1].label, 1);
  EXPECT_EQ(d.examples[1].text_a, "What is the first major city in the stream of the Rhine?");
  write("test", "index\tquestion\tsentence\n0\tWhat organization is devoted to Jihad against Israel?\tFor some decades prior.\n");
  EXPECT_FALSE(read("qnli", "test").labeled);
}

TEST_F(GlueFiles, ColaWithBomCrlfAndNoFinalNewline) {
  write("train", "\xEF\xBB\xBFgj04\t1\t\tThe sailors rode the breeze.\r\ngj04\t0\t*\tThe \"more\" he ate.\r\n\r\n");
  const auto s = read("cola", "train");
  ASSERT_EQ(s.examples.size(), 2u);  // the trailing blank line is no row
  EXPECT_EQ(s.examples[0].text_a, "The sailors rode the breeze.");
  EXPECT_EQ(s.examples[0].index, 0);
  EXPECT_EQ(s.examples[1].text_a, "The \"more\" he ate.");
  EXPECT_EQ(s.examples[1].label, 0);
  EXPECT_EQ(s.examples[1].index, 1);
  EXPECT_EQ(s.examples[1].line, 2);
  write("test", "index\tsentence\n0\tBill whistled past the house.");
  EXPECT_EQ(read("cola", "test").examples.at(0).text_a, "Bill whistled past the house.");
}

TEST_F(GlueFiles, MrpcWithAndWithoutBom) {
  const std::string body = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tA , \" B \" .\tC .\n";
  write("dev", body);
  const auto plain = read("mrpc", "dev");
  write("dev", "\xEF\xBB\xBF" + body);
  const auto bom = read("mrpc", "dev");
  for (const auto* s : {&plain, &bom}) {
    ASSERT_EQ(s->examples.size(), 1u);
    EXPECT_EQ(s->examples[0].label, 1);
    EXPECT_EQ(s->examples[0].index, 0);  // no index column: the row number
    EXPECT_EQ(s->examples[0].text_a, "A , \" B \" .");
    EXPECT_EQ(s->examples[0].text_b, "C .");
  }
  write("test", "\xEF\xBB\xBFindex\t#1 ID\t#2 ID\t#1 String\t#2 String\n5\t1\t2\tx\ty\n");
  EXPECT_EQ(read("mrpc", "test").examples.at(0).index, 5);
}

// --- errors --------------------------------------------------------------------------------

TEST_F(GlueFiles, ErrorsNameFileAndLine) {
  EXPECT_ERROR(read("rte", "train"), "GLUE rte train: no file " + path("train") + " (HINT: dir should be");
  const std::string rte_header = "index\tsentence1\tsentence2\tlabel\n";
  write("train", rte_header + "0\ta\tb\tentailment\n1\ta\tb\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":3: malformed row: 3 tab-separated fields, expected 4");
  write("train", rte_header + "0\ta\tb\tentailment\n1\ta\tb\tmaybe\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":3: unknown rte label 'maybe'; valid: entailment, not_entailment");
  write("train", rte_header + "zero\ta\tb\tentailment\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":2: index 'zero' is not an integer");
  write("train", "index\tsentence1\tlabel\n0\ta\tentailment\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":1: header has no column 'sentence2' (columns: index, sentence1, label)");
  write("train", rte_header + "0\ta\tb\tentailment\n\n1\ta\tb\tentailment\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":3: blank line inside the data");
  write("train", rte_header + "0\ta\tb\tentailment\n1\ta\t\xC3(\tentailment\n");
  EXPECT_ERROR(read("rte", "train"), path("train") + ":3: invalid UTF-8 at byte 5");
  write("train", rte_header);
  EXPECT_ERROR(read("rte", "train"), path("train") + ": no data rows");
  write("train", "index\tsentence1\tsentence1\tsentence2\tlabel\n");
  EXPECT_ERROR(read("rte", "train"), "column 'sentence1' appears twice");
  EXPECT_ERROR(read("rte", "validation"), "unknown split 'validation'; valid: train, dev, test");

  const std::string stsb_header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
  write("dev", stsb_header + "0\tg\tf\t2012\t0\tnone\tnone\ta\tb\t4.2x\n");
  EXPECT_ERROR(read("stsb", "dev"), path("dev") + ":2: score '4.2x' is not a finite number");
  write("dev", stsb_header + "0\tg\tf\t2012\t0\tnone\tnone\ta\tb\tnan\n");
  EXPECT_ERROR(read("stsb", "dev"), "score 'nan' is not a finite number");
  write("dev", stsb_header + "0\tg\tf\t2012\t0\tnone\tnone\ta\tb\t2.5\n");
  EXPECT_FLOAT_EQ(read("stsb", "dev").examples.at(0).score, 2.5f);

  // CoLA train has no header: a row with the wrong field count says which layout it expects.
  write("train", "gj04\t1\t\tfine\ngj04\t1\tno sentence\n");
  EXPECT_ERROR(read("cola", "train"), path("train") + ":2: malformed row: 3 tab-separated fields, expected 4 (CoLA");
  write("train", "gj04\t2\t\tbad label\n");
  EXPECT_ERROR(read("cola", "train"), path("train") + ":1: unknown cola label '2'; valid: 0, 1");
  // A NUL or control byte in quoted data is shown escaped; it cut the message short.
  const char nul_row[] = "gj04\t1\0x\t\tbad label\n";
  write("train", std::string(nul_row, sizeof nul_row - 1));
  EXPECT_ERROR(read("cola", "train"), path("train") + ":1: unknown cola label '1\\x00x'; valid: 0, 1");
  write("train", rte_header + "0\ta\tb\tnot\x1b[31m\n");
  EXPECT_ERROR(read("rte", "train"), "unknown rte label 'not\\x1b[31m'; valid: entailment, not_entailment");
  // QQP skips short rows, but a bad label is still an error.
  write("train", "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t2\t3\ta\tb\tyes\n");
  EXPECT_ERROR(read("qqp", "train"), path("train") + ":2: unknown qqp label 'yes'");
}

TEST_F(GlueFiles, TestSplitsAreUnlabeledUnlessTheFileHasLabels) {
  write("test", "index\tsentence1\tsentence2\n0\ta\tb\n");
  const auto t = read("wnli", "test");
  EXPECT_FALSE(t.labeled);
  EXPECT_FALSE(t.examples.at(0).has_label);
  EXPECT_EQ(t.examples.at(0).label, -1);
  write("test", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n");
  const auto l = read("wnli", "test");
  EXPECT_TRUE(l.labeled);
  EXPECT_EQ(l.examples.at(0).label, 1);
}

// --- submissions ---------------------------------------------------------------------------

TEST_F(GlueFiles, SubmissionFilesPerTaskKind) {
  const std::string out = (dir_ / "submit").string();
  write_glue_submission(glue_task("mnli"), "test_matched", {0, 1, 2}, {0, 1, 2}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "MNLI-m.tsv"),
            "index\tprediction\n0\tentailment\n1\tneutral\n2\tcontradiction\n");
  write_glue_submission(glue_task("mnli"), "test_mismatched", {4}, {2}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "MNLI-mm.tsv"), "index\tprediction\n4\tcontradiction\n");
  write_glue_submission(glue_task("qnli"), "test", {0, 1}, {1, 0}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "QNLI.tsv"), "index\tprediction\n0\tnot_entailment\n1\tentailment\n");
  write_glue_submission(glue_task("cola"), "test", {0, 1}, {1, 0}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "CoLA.tsv"), "index\tprediction\n0\t1\n1\t0\n");
  write_glue_submission(glue_task("qqp"), "test", {10, 11}, {0, 1}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "QQP.tsv"), "index\tprediction\n10\t0\n11\t1\n");
  write_glue_submission(glue_task("stsb"), "test", {0, 1, 2, 3, 4, 5},
                        {-0.3, 5.7, 3.14159, -0.0, 4.99951, 2.0}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "STS-B.tsv"),
            "index\tprediction\n0\t0.000\n1\t5.000\n2\t3.142\n3\t0.000\n4\t5.000\n5\t2.000\n");
  // Rewriting replaces the file.
  write_glue_submission(glue_task("cola"), "test", {0}, {0}, out);
  EXPECT_EQ(read_text(dir_ / "submit" / "CoLA.tsv"), "index\tprediction\n0\t0\n");
}

TEST_F(GlueFiles, SubmissionErrors) {
  const std::string out = (dir_ / "submit").string();
  const auto& rte = glue_task("rte");
  EXPECT_ERROR(write_glue_submission(rte, "test", {0, 1}, {0, 2}, out),
               "prediction 1 (index 1) is 2, not a class id in [0, 2)");
  EXPECT_ERROR(write_glue_submission(rte, "test", {0, 1}, {0, 0.5}, out), "is 0.5, not a class id");
  EXPECT_ERROR(write_glue_submission(rte, "test", {0, 0}, {0, 1}, out), "index 0 appears twice (row 1)");
  EXPECT_ERROR(write_glue_submission(rte, "test", {0, 1}, {0}, out), "2 indices but 1 predictions");
  EXPECT_ERROR(write_glue_submission(rte, "dev", {0}, {0}, out), "no submission file for split 'dev'");
  EXPECT_ERROR(write_glue_submission(glue_task("stsb"), "test", {0}, {std::nan("")}, out),
               "prediction 0 (index 0) is NaN");
  EXPECT_FALSE(fs::exists(dir_ / "submit" / "RTE.tsv"));
}

}  // namespace
}  // namespace lb::data
