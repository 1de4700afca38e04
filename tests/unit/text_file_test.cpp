// A user's own text files: CSV quoting as pandas reads it, TSV, JSON Lines, plain text lines,
// the class names' order, and every error naming file:line.
#include <gtest/gtest.h>

#include <fstream>

#include "lb/data/text_file.h"
#include "testing/testing.h"

namespace lb::data {
namespace {

using testing::error_message;

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.sub(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const TextColumns kPair{{"s1", "s2"}, "y"};

TEST(TextFile, CsvQuotingAsPandasReadsIt) {
  testing::TempDir dir("csv");
  // BOM, CRLF, a quoted separator, a doubled quote, a quoted line break, a blank line, an
  // extra column, and a quote inside an unquoted field (kept as written).
  const std::string path = write(dir, "train.csv",
                                 "\xEF\xBB\xBFid,s1,s2,y\r\n"
                                 "1,\"a, b\",\"say \"\"hi\"\"\",pos\r\n"
                                 "\n"
                                 "2,\"two\nlines\",it's 5\" long,neg\r\n"
                                 "3,x,,pos\n");
  const TextFile f = read_text_file(path, TextFormat::Csv, kPair, true);
  ASSERT_EQ(f.rows.size(), 3u);
  EXPECT_TRUE(f.labeled);
  EXPECT_EQ(f.rows[0].texts, (std::vector<std::string>{"a, b", "say \"hi\""}));
  EXPECT_EQ(f.rows[0].label, "pos");
  EXPECT_EQ(f.rows[0].line, 2);
  EXPECT_EQ(f.rows[1].texts, (std::vector<std::string>{"two\nlines", "it's 5\" long"}));
  EXPECT_EQ(f.rows[1].line, 4);
  EXPECT_EQ(f.rows[2].texts, (std::vector<std::string>{"x", ""}));
  EXPECT_EQ(f.rows[2].line, 6);
  EXPECT_EQ(sorted_label_names(f), (std::vector<std::string>{"neg", "pos"}));
}

TEST(TextFile, TsvAndAnUnlabeledFile) {
  testing::TempDir dir("tsv");
  const std::string path = write(dir, "test.tsv", "text\tnote\nhello, world\tx\n\"quoted\ttab\"\ty\n");
  const TextFile f = read_text_file(path, TextFormat::Tsv, {{"text"}, "label"}, false);
  EXPECT_FALSE(f.labeled);
  ASSERT_EQ(f.rows.size(), 2u);
  EXPECT_EQ(f.rows[0].texts[0], "hello, world");
  EXPECT_EQ(f.rows[1].texts[0], "quoted\ttab");
  EXPECT_EQ(f.rows[1].label, "");
}

TEST(TextFile, JsonLines) {
  testing::TempDir dir("jsonl");
  const std::string path = write(dir, "train.jsonl",
                                 "{\"s1\": \"a\", \"s2\": \"b\", \"y\": 10, \"extra\": [1]}\n\n"
                                 "{\"s1\": \"c\", \"s2\": \"d\\n\", \"y\": 2}\r\n"
                                 "{\"s1\": \"e\", \"s2\": \"f\", \"y\": 2.5}\n");
  const TextFile f = read_text_file(path, TextFormat::JsonLines, kPair, true);
  ASSERT_EQ(f.rows.size(), 3u);
  EXPECT_EQ(f.rows[1].texts, (std::vector<std::string>{"c", "d\n"}));
  EXPECT_EQ(f.rows[1].line, 3);
  EXPECT_EQ(f.rows[0].label, "10");
  EXPECT_EQ(f.rows[2].label, "2.5");
  // Numbers sort as numbers (as Hugging Face sorts integer labels), not as strings.
  EXPECT_EQ(sorted_label_names(f), (std::vector<std::string>{"2", "2.5", "10"}));
}

TEST(TextFile, PlainTextLines) {
  testing::TempDir dir("txt");
  const std::string single = write(dir, "in.txt", "first text\n\nsecond\ttext\n");
  const TextFile f = read_text_lines(single, false);
  ASSERT_EQ(f.rows.size(), 2u);
  EXPECT_EQ(f.rows[1].texts, (std::vector<std::string>{"second\ttext"}));
  EXPECT_NE(error_message([&] { read_text_lines(single, true); }).find("in.txt:1: no tab"), std::string::npos);
  const std::string pairs = write(dir, "pairs.txt", "a\tb\n");
  EXPECT_EQ(read_text_lines(pairs, true).rows.at(0).texts, (std::vector<std::string>{"a", "b"}));
}

TEST(TextFile, FormatsByNameAndExtension) {
  EXPECT_EQ(text_format_from_name("tsv"), TextFormat::Tsv);
  EXPECT_EQ(text_format_of_file("/x/Train.CSV"), TextFormat::Csv);
  EXPECT_EQ(text_format_of_file("a.jsonl"), TextFormat::JsonLines);
  EXPECT_NE(error_message([] { text_format_of_file("a.xlsx"); }).find("'.xlsx' (known: .csv, .tsv, .jsonl)"),
            std::string::npos);
  EXPECT_NE(error_message([] { text_format_from_name("parquet"); }).find("valid: csv, tsv, jsonl"), std::string::npos);
}

// Every bad file is an error naming file:line and what is wrong.
TEST(TextFile, ErrorsNameFileAndLine) {
  testing::TempDir dir("bad");
  auto err = [&](const std::string& name, const std::string& text, TextFormat f = TextFormat::Csv,
                 bool label_required = true) {
    const std::string path = write(dir, name, text);
    return error_message([&] { read_text_file(path, f, kPair, label_required); });
  };
  auto has = [](const std::string& msg, const std::string& needle) {
    return msg.find(needle) != std::string::npos ? ::testing::AssertionSuccess()
                                                 : ::testing::AssertionFailure() << msg;
  };
  EXPECT_TRUE(has(err("a.csv", "s1,y\nx,1\n"), "a.csv:1: no text column 's2' in the header (columns: s1, y)"));
  EXPECT_TRUE(has(err("b.csv", "s1,s2\nx,y\n"), "b.csv:1: no label column 'y'"));
  EXPECT_TRUE(has(err("c.csv", "s1,s2,y\nx,y,1\nx,y\n"), "c.csv:3: 2 fields, expected 3"));
  EXPECT_TRUE(has(err("d.csv", "s1,s2,y\nx,\"open,1\nmore\n"), "d.csv:2: a quoted field opened on this line is never closed"));
  EXPECT_TRUE(has(err("e.csv", "s1,s2,y\nx,y,\n"), "e.csv:2: empty label in column 'y'"));
  EXPECT_TRUE(has(err("f.csv", ""), "f.csv: empty file"));
  EXPECT_TRUE(has(err("g.csv", "s1,s2,y\n"), "g.csv: no data rows"));
  EXPECT_TRUE(has(err("h.csv", "s1,s2,y\nx,\xff,1\n"), "h.csv:2: invalid UTF-8"));
  EXPECT_TRUE(has(err("i.csv", "s1,s1,s2,y\n"), "i.csv:1: column 's1' appears twice"));
  const auto J = TextFormat::JsonLines;
  EXPECT_TRUE(has(err("a.jsonl", "{\"s1\":\"a\",\"s2\":\"b\",\"y\":1}\n{\"s1\":\"a\"\n", J), "a.jsonl:2: not a JSON object"));
  EXPECT_TRUE(has(err("b.jsonl", "[1]\n", J), "b.jsonl:1: a JSON array, expected one object per line"));
  EXPECT_TRUE(has(err("c.jsonl", "{\"s1\":\"a\",\"s2\":3,\"y\":1}\n", J), "c.jsonl:1: 's2' is a JSON number, expected a string"));
  EXPECT_TRUE(has(err("d.jsonl", "{\"s1\":\"a\",\"y\":1}\n", J), "d.jsonl:1: no text key 's2' (keys: s1, y)"));
  EXPECT_TRUE(has(err("e.jsonl", "{\"s1\":\"a\",\"s2\":\"b\",\"y\":1}\n{\"s1\":\"a\",\"s2\":\"b\"}\n", J),
                  "e.jsonl:2: no label key 'y' where the file's first row has one"));
  EXPECT_TRUE(has(err("f.jsonl", "{\"s1\":\"a\",\"s2\":\"b\",\"y\":null}\n", J), "f.jsonl:1: label 'y' is a JSON null"));
  EXPECT_TRUE(has(err("g.jsonl", "{\"s1\":\"a\",\"s2\":\"b\"}\n", J), "g.jsonl:1: no label key 'y'"));
  EXPECT_TRUE(has(err("h.jsonl", "\n\n", J), "h.jsonl: empty file"));
  EXPECT_TRUE(has(error_message([&] { read_text_file(dir.sub("none.csv"), TextFormat::Csv, kPair, true); }),
                  "no file " + dir.sub("none.csv")));
}

}  // namespace
}  // namespace lb::data
