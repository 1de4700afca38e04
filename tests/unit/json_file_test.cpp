// The JSON reader every user file goes through (lb/io/json_file.h): deep nesting, size,
// syntax errors and duplicate keys are named errors at every entry point — configs, Hugging
// Face config.json, safetensors headers, trainer_state.json — never a stack overflow.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"
#include "lb/nn/layers.h"
#include "lb/train/run/checkpoint.h"
#include "lb/train/config.h"
#include "models/hf_import.h"
#include "testing/testing.h"

namespace lb {
namespace {

namespace fs = std::filesystem;

// 200 KB of nesting, as the reviewer's file: depth 100000.
std::string deep(const std::string& prefix = "", const std::string& suffix = "") {
  return prefix + std::string(100000, '[') + std::string(100000, ']') + suffix;
}

using testing::error_message;

void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

TEST(JsonFile, DepthSizeAndSyntaxErrorsNameTheSource) {
  EXPECT_EQ(io::parse_json(R"({"a": [1, {"b": 2}]})", "x.json")["a"][1]["b"], 2);
  std::string m = error_message([] { io::parse_json(deep(), "deep.json"); });
  EXPECT_NE(m.find("deep.json: JSON nested deeper than 64 levels"), std::string::npos) << m;
  m = error_message([] { io::parse_json("{\n  \"a\": 1,\n  oops\n}", "bad.json"); });
  EXPECT_NE(m.find("bad.json:3:3: invalid JSON"), std::string::npos) << m;
  m = error_message([] { io::read_json_file("/nonexistent/x.json"); });
  EXPECT_NE(m.find("/nonexistent/x.json: no such file"), std::string::npos) << m;
}

// Found by fuzz_config: a number past double's range made nlohmann throw out_of_range (406)
// from the parser, which escaped as a raw exception without the file's name.
TEST(JsonFile, NumberOverflowIsANamedError) {
  const std::string m = error_message([] { io::parse_json(R"({"train": {"epochs": 999999E8318}})", "big.json"); });
  EXPECT_NE(m.find("big.json: invalid JSON"), std::string::npos) << m;
  EXPECT_NE(m.find("number overflow"), std::string::npos) << m;
}

// nlohmann keeps the last of two equal keys without a word: `"lr": 1e-3, "lr": 7.0` trained
// at 7.0. Now an error naming the key, both lines and the object's JSON pointer.
TEST(JsonFile, DuplicateKeysNameTheKeyBothLinesAndTheObject) {
  std::string m = error_message([] {
    io::parse_json("{\n  \"optimizer\": {\n    \"lr\": 1e-3,\n    \"wd\": 0,\n    \"lr\": 7.0\n  }\n}", "cfg.json");
  });
  EXPECT_NE(m.find("cfg.json:5: duplicate key \"lr\" in object /optimizer (first on line 3)"), std::string::npos) << m;
  m = error_message([] { io::parse_json(R"({"a": 1, "b": {}, "a": 2})", "top.json"); });
  EXPECT_NE(m.find("top.json:1: duplicate key \"a\" in the top-level object (first on line 1)"), std::string::npos)
      << m;
  // Keys compare unescaped; strings holding quotes, braces and commas do not confuse the
  // scan that finds the lines; arrays count in the pointer; "/" in a key is escaped as ~1.
  m = error_message([] {
    io::parse_json("{\"s\": \"x\\\"}, {\\\"k\\\": [\",\n \"t/u\": [{\"k\": 1}, {\"k\": 2, \"z\": {\"k\": 0,\n"
                   "  \"\\u006b\": 1}}]}",
                   "nest.json");
  });
  EXPECT_NE(m.find("nest.json:3: duplicate key \"k\" in object /t~1u/1/z (first on line 2)"), std::string::npos) << m;
  // A NUL in a key is shown escaped, not cutting the message.
  m = error_message([] { io::parse_json(R"({"\u0000x": 1, "\u0000x": 2})", "nul.json"); });
  EXPECT_NE(m.find("duplicate key \"\\x00x\" in the top-level object"), std::string::npos) << m;
  // The same key in different objects is fine, as is a leading UTF-8 BOM.
  const auto j = io::parse_json("\xEF\xBB\xBF{\"a\": {\"k\": 1}, \"b\": {\"k\": 2}, \"c\": [{\"k\": 1}, {\"k\": 2}]}", "ok.json");
  EXPECT_EQ(j["c"][1]["k"], 2);
  // Syntax errors keep line:col and lose nlohmann's exception tag.
  m = error_message([] { io::parse_json("{\"a\": 1,\n  ]", "syntax.json"); });
  EXPECT_NE(m.find("syntax.json:2:3: invalid JSON: syntax error"), std::string::npos) << m;
  EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
}

TEST(JsonFile, EveryEntryPointRefusesDuplicateKeys) {
  testing::TempDir tmp("lb_json");
  write(tmp.sub("config.json"), "{\"task\": \"synthetic\",\n \"optimizer\": {\"lr\": 1e-3,\n \"lr\": 7.0}}");
  std::string m = error_message([&] { train::load_config(tmp.sub("config.json"), {}); });
  EXPECT_NE(m.find("config.json:3: duplicate key \"lr\" in object /optimizer (first on line 2)"), std::string::npos)
      << m;
  fs::create_directories(tmp.sub("hf"));
  write(tmp.sub("hf") + "/config.json", "{\"hidden_size\": 8,\n\"hidden_size\": 16}");
  m = error_message([&] { models::load_hf_bert(tmp.sub("hf"), 2); });
  EXPECT_NE(m.find("hf/config.json:2: duplicate key \"hidden_size\" in the top-level object (first on line 1)"),
            std::string::npos)
      << m;
  nn::Linear lin(2, 2);
  train::save_checkpoint(tmp.sub("ck"), lin, nullptr, nullptr);
  write(tmp.sub("ck") + "/trainer_state.json", R"({"format_version": 2, "format_version": 2})");
  m = error_message([&] { train::load_checkpoint(tmp.sub("ck"), lin, nullptr); });
  EXPECT_NE(m.find("trainer_state.json:1: duplicate key \"format_version\""), std::string::npos) << m;
}

TEST(JsonFile, EveryEntryPointRefusesDeepNesting) {
  testing::TempDir tmp("lb_json");
  // A run config.
  write(tmp.sub("config.json"), deep(R"({"model": )", "}"));
  std::string m = error_message([&] { train::load_config(tmp.sub("config.json"), {}); });
  EXPECT_NE(m.find("nested deeper than 64"), std::string::npos) << m;
  // A Hugging Face directory's config.json.
  fs::create_directories(tmp.sub("hf"));
  write(tmp.sub("hf") + "/config.json", deep(R"({"hidden_size": 8, "x": )", "}"));
  m = error_message([&] { models::load_hf_bert(tmp.sub("hf"), 2); });
  EXPECT_NE(m.find("config.json: JSON nested deeper than 64"), std::string::npos) << m;
  // A safetensors header (__metadata__ values must be strings, but the parser sees it first).
  const std::string header = deep(R"({"__metadata__": {"x": )", "}}");
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  write(tmp.sub("deep.safetensors"), file + header);
  m = error_message([&] { io::load_safetensors(tmp.sub("deep.safetensors")); });
  EXPECT_NE(m.find("nested deeper than 64"), std::string::npos) << m;
  // A checkpoint's trainer_state.json.
  nn::Linear lin(2, 2);
  train::save_checkpoint(tmp.sub("ck"), lin, nullptr, nullptr);
  write(tmp.sub("ck") + "/trainer_state.json", deep(R"({"format_version": 2, "x": )", "}"));
  m = error_message([&] { train::load_checkpoint(tmp.sub("ck"), lin, nullptr); });
  EXPECT_NE(m.find("trainer_state.json: JSON nested deeper than 64"), std::string::npos) << m;
}

}  // namespace
}  // namespace lb
