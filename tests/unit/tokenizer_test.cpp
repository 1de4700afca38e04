// WordPiece tokenizer: the rules on a tiny vocab written here (no shared data needed), then
// Hugging Face BertTokenizerFast goldens (tools/golden/gen_tokenizer.py) over the real
// bert-base-uncased vocab: hand-made tricky texts and every GLUE dev example.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/data/tokenizer.h"
#include "testing/testing.h"

namespace lb::data {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int64_t>;
using Strings = std::vector<std::string>;

// Words for the tiny vocab; ids are positions (specials first, as in BERT).
const Strings kTinyVocab = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", "!", ".", "'", "un",
    "##aff", "##able", "a", "##a", "b", "c", "d", "uber", "cafe", "über", "中", "文", "i",
    "##̇",  // combining dot above, for İ when accents are kept
    "bc", "x", "y", "z", "the", "cat", "sat", "on", "mat", "##s", "ab", "cd",
};

class TokenizerTest : public ::testing::Test {
 protected:
  lb::testing::TempDir tmp_{"lb_tok"};
  const fs::path& dir_ = tmp_.path();

  std::string write(const std::string& name, const std::string& content) const {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  std::string write_vocab(const Strings& tokens, const std::string& name = "vocab.txt") const {
    std::string s;
    for (const auto& t : tokens) s += t + "\n";
    return write(name, s);
  }
  WordPieceTokenizer tiny(bool lower = true) const {
    return WordPieceTokenizer::from_vocab_file(write_vocab(kTinyVocab), lower);
  }
  static Ids ids_of(const WordPieceTokenizer& t, const Strings& tokens) {
    Ids out;
    for (const auto& s : tokens) out.push_back(t.token_to_id(s));
    return out;
  }
};

// The message of the lb::Error that f throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// tests/fixtures/tokenizer_tiny_vocab.txt is the same vocab for the CLI's CTest checks.
TEST_F(TokenizerTest, TinyVocabFixtureIsThisVocab) {
  std::ifstream in(testing::fixture_path("tokenizer_tiny_vocab.txt"));
  Strings lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_EQ(lines, kTinyVocab);
}

TEST_F(TokenizerTest, VocabIdsAndSpecials) {
  const auto t = tiny();
  EXPECT_EQ(t.vocab_size(), static_cast<int64_t>(kTinyVocab.size()));
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 1);
  EXPECT_EQ(t.cls_id(), 2);
  EXPECT_EQ(t.sep_id(), 3);
  EXPECT_EQ(t.mask_id(), 4);
  EXPECT_EQ(t.token_to_id("##aff"), 12);
  EXPECT_EQ(t.token_to_id("aff"), -1);
  EXPECT_EQ(t.token_to_id("nope"), -1);
  for (int64_t id = 0; id < t.vocab_size(); ++id) EXPECT_EQ(t.token_to_id(t.id_to_token(id)), id);
  EXPECT_TRUE(t.do_lower_case());
  EXPECT_FALSE(tiny(false).do_lower_case());
}

TEST_F(TokenizerTest, SplitsOnWhitespaceAndPunctuation) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("Hello, World!"), (Strings{"hello", ",", "world", "!"}));
  EXPECT_EQ(t.tokenize("  hello\t\nworld\r "), (Strings{"hello", "world"}));
  EXPECT_EQ(t.tokenize("a'b.c"), (Strings{"a", "'", "b", ".", "c"}));
  EXPECT_EQ(t.tokenize_ids("hello,world"), ids_of(t, {"hello", ",", "world"}));
  EXPECT_TRUE(t.tokenize("").empty());
  EXPECT_TRUE(t.tokenize(" \t\n\u00a0\u3000").empty());
}

TEST_F(TokenizerTest, WordPieceContinuationAndUnknown) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("unaffable"), (Strings{"un", "##aff", "##able"}));
  EXPECT_EQ(t.tokenize("cats"), (Strings{"cat", "##s"}));
  // Longest match first: "ab" before "a".
  EXPECT_EQ(t.tokenize("ab"), (Strings{"ab"}));
  // No piece for the tail: the whole word is one [UNK], the neighbours are unaffected.
  EXPECT_EQ(t.tokenize("hello unaffablez world"), (Strings{"hello", "[UNK]", "world"}));
  EXPECT_EQ(t.tokenize("q"), (Strings{"[UNK]"}));
}

TEST_F(TokenizerTest, WordsOverOneHundredCharactersAreUnknown) {
  const auto t = tiny();
  const auto pieces = t.tokenize(std::string(100, 'a'));
  ASSERT_EQ(pieces.size(), 100u);
  EXPECT_EQ(pieces[0], "a");
  EXPECT_EQ(pieces[99], "##a");
  EXPECT_EQ(t.tokenize(std::string(101, 'a') + " b"), (Strings{"[UNK]", "b"}));
  // The limit counts code points of the normalised word, not bytes: 100 x "á" is 200 bytes
  // (300 before the accent is stripped) and still cut.
  std::string accented;
  for (int i = 0; i < 100; ++i) accented += "\u00e1";
  EXPECT_EQ(t.tokenize(accented).size(), 100u);
  EXPECT_EQ(t.tokenize(accented + "\u00e1"), (Strings{"[UNK]"}));
}

TEST_F(TokenizerTest, LowercaseStripsAccentsAfterDecomposition) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("ÜBER Café"), (Strings{"uber", "cafe"}));
  EXPECT_EQ(t.tokenize("U\u0308ber"), (Strings{"uber"}));  // already decomposed
  EXPECT_EQ(t.tokenize("\u0130"), (Strings{"i"}));         // İ: NFD I + U+0307, mark dropped
  const auto cased = tiny(false);
  EXPECT_EQ(cased.tokenize("über Über"), (Strings{"über", "[UNK]"}));
  EXPECT_EQ(cased.tokenize("hello Hello"), (Strings{"hello", "[UNK]"}));
}

TEST_F(TokenizerTest, LowercaseWithoutStrippingKeepsMarks) {
  BasicTokenizerOptions o;
  o.lowercase = true;
  o.strip_accents = false;
  const auto t = WordPieceTokenizer::from_vocab_file(write_vocab(kTinyVocab), o);
  EXPECT_EQ(t.tokenize("Über"), (Strings{"über"}));
  // Rust's char::to_lowercase of İ is i + U+0307 (the full mapping).
  EXPECT_EQ(t.tokenize("\u0130"), (Strings{"i", "##\u0307"}));
}

TEST_F(TokenizerTest, CleansControlAndFormatCharacters) {
  const auto t = tiny();
  // Cc/Cf/Co characters vanish without splitting; \x0b and \x0c are controls, not spaces.
  EXPECT_EQ(t.tokenize("b\x01"
                       "c a\x7f"
                       "b\u200b\ufeff\u00ad c\x0b"
                       "d"),
            (Strings{"bc", "ab", "cd"}));
  EXPECT_EQ(t.tokenize(std::string("b\0c", 3)), (Strings{"bc"}));
  // Unicode spaces (Zs, Zl, Zp) split.
  EXPECT_EQ(t.tokenize("a\u00a0b\u2003c\u2028d\u3000x"), (Strings{"a", "b", "c", "d", "x"}));
  EXPECT_EQ(t.tokenize("a\ue000b\ufffdc"), (Strings{"[UNK]"}));  // "abc": "ab", then no "##c"
}

TEST_F(TokenizerTest, InvalidUtf8BytesAreDropped) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("a\xff"
                       "b \xe2\x82 c \xed\xa0\x80 d\xc3"),
            (Strings{"ab", "c", "d"}));
}

TEST_F(TokenizerTest, CjkIdeographsAreSeparateWords) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("ab中文cd"), (Strings{"ab", "中", "文", "cd"}));
  BasicTokenizerOptions o;
  o.tokenize_chinese_chars = false;
  const auto off = WordPieceTokenizer::from_vocab_file(write_vocab(kTinyVocab), o);
  EXPECT_EQ(off.tokenize("ab中文cd"), (Strings{"[UNK]"}));
}

TEST_F(TokenizerTest, SpecialTokensInTextMatchVerbatim) {
  const auto t = tiny();
  EXPECT_EQ(t.tokenize("hello [MASK] world[SEP]x"),
            (Strings{"hello", "[MASK]", "world", "[SEP]", "x"}));
  EXPECT_EQ(t.tokenize_ids("[CLS][PAD]"), (Ids{2, 0}));
  // Case-sensitive and whole: "[mask]" and "[MASK" are ordinary text.
  EXPECT_EQ(t.tokenize("[mask] [MASK"), (Strings{"[UNK]", "[UNK]", "[UNK]", "[UNK]", "[UNK]"}));
}

TEST_F(TokenizerTest, EncodeSingleAndPair) {
  const auto t = tiny();
  const std::string b = "the cat";
  const Encoding single = t.encode("hello world", nullptr, 0);
  EXPECT_EQ(single.input_ids, (Ids{2, 5, 6, 3}));
  EXPECT_EQ(single.token_type_ids, (Ids{0, 0, 0, 0}));
  const Encoding pair = t.encode("hello world", &b, 0);
  EXPECT_EQ(pair.input_ids, (Ids{2, 5, 6, 3, 30, 31, 3}));
  EXPECT_EQ(pair.token_type_ids, (Ids{0, 0, 0, 0, 1, 1, 1}));
  const std::string empty;
  EXPECT_EQ(t.encode("hello", &empty, 0).input_ids, (Ids{2, 5, 3, 3}));
  EXPECT_EQ(t.encode("hello world", nullptr, 3).input_ids, (Ids{2, 5, 3}));
  EXPECT_EQ(t.encode("hello world", nullptr, 2).input_ids, (Ids{2, 3}));
}

// tokenizers' LongestFirst rule stated independently: with budget L = max_len - 3, if the
// shorter text can keep its length and the longer take the rest, it does; otherwise the
// shorter gets floor(L/2) and the longer ceil(L/2) (b the longer one on a tie).
std::pair<int64_t, int64_t> longest_first_rule(int64_t na, int64_t nb, int64_t max_len) {
  const int64_t budget = max_len - 3;
  if (na + nb <= budget) return {na, nb};
  const int64_t shorter = std::min(na, nb);
  if (shorter <= budget - shorter) return na <= nb ? std::pair{na, budget - na} : std::pair{budget - nb, nb};
  const int64_t lo = budget / 2, hi = budget - lo;
  return na > nb ? std::pair{hi, lo} : std::pair{lo, hi};
}

TEST_F(TokenizerTest, LongestFirstTruncation) {
  const auto t = tiny();
  auto seq = [](int64_t n, int64_t first) {
    Ids v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = first + i;
    return v;
  };
  // The 10 + 3 pair to max_len 9: 6 ids left for texts; b keeps 3, a gets 3.
  const Ids a10 = seq(10, 100), b3 = seq(3, 200);
  const Encoding e = t.encode_ids(a10, &b3, 9);
  EXPECT_EQ(e.input_ids, (Ids{2, 100, 101, 102, 3, 200, 201, 202, 3}));
  EXPECT_EQ(e.token_type_ids, (Ids{0, 0, 0, 0, 0, 1, 1, 1, 1}));
  const Ids b2 = seq(2, 200);
  EXPECT_EQ(t.encode_ids(a10, &b2, 9).input_ids, (Ids{2, 100, 101, 102, 103, 3, 200, 201, 3}));
  for (int64_t na = 0; na <= 12; ++na)
    for (int64_t nb = 0; nb <= 12; ++nb)
      for (int64_t max_len = 3; max_len <= 20; ++max_len) {
        const Ids a = seq(na, 100), b = seq(nb, 200);
        const Encoding enc = t.encode_ids(a, &b, max_len);
        const auto [ka, kb] = longest_first_rule(na, nb, max_len);
        Ids want{2};
        want.insert(want.end(), a.begin(), a.begin() + ka);
        want.push_back(3);
        want.insert(want.end(), b.begin(), b.begin() + kb);
        want.push_back(3);
        ASSERT_EQ(enc.input_ids, want) << na << " + " << nb << " to " << max_len;
        ASSERT_EQ(enc.token_type_ids.size(), want.size());
        EXPECT_LE(static_cast<int64_t>(want.size()), max_len);
      }
  // No truncation at max_len <= 0.
  EXPECT_EQ(t.encode_ids(a10, &b3, 0).input_ids.size(), 16u);
  EXPECT_EQ(t.encode_ids(a10, &b3, -1).input_ids.size(), 16u);
}

TEST_F(TokenizerTest, Errors) {
  EXPECT_NE(error_of([&] { WordPieceTokenizer::from_vocab_file((dir_ / "none.txt").string()); })
                .find("cannot open vocab file"),
            std::string::npos);
  const std::string no_cls = write_vocab({"[PAD]", "[UNK]", "[SEP]", "a"}, "no_cls.txt");
  const std::string msg = error_of([&] { WordPieceTokenizer::from_vocab_file(no_cls); });
  EXPECT_NE(msg.find("no_cls.txt has no [CLS]"), std::string::npos) << msg;
  const std::string dup = write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "a", "b", "a"}, "dup.txt");
  const std::string dmsg = error_of([&] { WordPieceTokenizer::from_vocab_file(dup); });
  EXPECT_NE(dmsg.find("dup.txt:7: duplicate token 'a' (first on line 5)"), std::string::npos) << dmsg;
  const std::string bad = write("bad.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nok\nb\xff\n");
  const std::string bmsg = error_of([&] { WordPieceTokenizer::from_vocab_file(bad); });
  EXPECT_NE(bmsg.find("bad.txt:6: invalid UTF-8"), std::string::npos) << bmsg;

  const auto t = tiny();
  const Ids a{5}, b{6};
  EXPECT_NE(error_of([&] { t.encode_ids(a, &b, 2); }).find("max_len 2 leaves no room"),
            std::string::npos);
  EXPECT_NE(error_of([&] { t.encode_ids(a, nullptr, 1); }).find("max_len 1"), std::string::npos);
  EXPECT_NE(error_of([&] { t.id_to_token(t.vocab_size()); }).find("outside the vocab"),
            std::string::npos);
}

TEST_F(TokenizerTest, FromDirReadsTokenizerConfig) {
  write_vocab(kTinyVocab);
  EXPECT_EQ(WordPieceTokenizer::from_dir(dir_.string()).tokenize("Über"), (Strings{"uber"}));
  EXPECT_EQ(WordPieceTokenizer::from_path(dir_.string()).tokenize("Über"), (Strings{"uber"}));
  write("tokenizer_config.json",
        R"({"do_lower_case": true, "strip_accents": false, "tokenize_chinese_chars": false,
            "model_max_length": 512, "tokenizer_class": "BertTokenizer"})");
  const auto t = WordPieceTokenizer::from_dir(dir_.string());
  EXPECT_TRUE(t.options().lowercase);
  EXPECT_FALSE(t.options().strip_accents);
  EXPECT_FALSE(t.options().tokenize_chinese_chars);
  EXPECT_EQ(t.tokenize("Über"), (Strings{"über"}));
  write("tokenizer_config.json", R"({"do_lower_case": false, "strip_accents": null})");
  EXPECT_FALSE(WordPieceTokenizer::from_dir(dir_.string()).options().strip_accents);
  write("tokenizer_config.json", R"({"do_lower_case": "yes"})");
  const std::string msg = error_of([&] { WordPieceTokenizer::from_dir(dir_.string()); });
  EXPECT_NE(msg.find("tokenizer_config.json: do_lower_case must be true, false or null"),
            std::string::npos) << msg;
  write("tokenizer_config.json", "{ not json");
  EXPECT_NE(error_of([&] { WordPieceTokenizer::from_dir(dir_.string()); }).find("invalid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([&] { WordPieceTokenizer::from_dir((dir_ / "nowhere").string()); })
                .find("has no vocab.txt"),
            std::string::npos);
}

// A vocab.txt saved with a UTF-8 BOM said "has no [PAD] token" (the first token was
// "\uFEFF[PAD]"); the BOM is dropped, in tokenizer_config.json too. Tokens quoted in errors
// show control bytes escaped.
TEST_F(TokenizerTest, BomAtTheStartOfVocabAndConfigIsDropped) {
  std::string text;
  for (const auto& t : kTinyVocab) text += t + "\r\n";
  write("vocab.txt", "\xEF\xBB\xBF" + text);
  write("tokenizer_config.json", "\xEF\xBB\xBF{\"do_lower_case\": false}");
  const auto t = WordPieceTokenizer::from_dir(dir_.string());
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.token_to_id("[PAD]"), 0);
  EXPECT_FALSE(t.options().lowercase);
  EXPECT_EQ(t.vocab_size(), static_cast<int64_t>(kTinyVocab.size()));
  // Only at the start of the file: a BOM further on is part of its token.
  const std::string later = write("later.txt", "[PAD]\n\xEF\xBB\xBF[UNK]\n[CLS]\n[SEP]\n");
  EXPECT_NE(error_of([&] { WordPieceTokenizer::from_vocab_file(later); }).find("later.txt has no [UNK]"),
            std::string::npos);
  const std::string dup = write("dup.txt", std::string("[PAD]\n[UNK]\n[CLS]\n[SEP]\na\x01\na\x01\n"));
  const std::string m = error_of([&] { WordPieceTokenizer::from_vocab_file(dup); });
  EXPECT_NE(m.find("dup.txt:6: duplicate token 'a\\x01' (first on line 5)"), std::string::npos) << m;
}

TEST_F(TokenizerTest, ThreadsShareOneTokenizer) {
  const auto t = tiny();
  const std::string text = "Hello, world! unaffable cats sat on the mat. 中文 ÜBER";
  const Ids want = t.tokenize_ids(text), want_x = t.tokenize_ids(text + " x");
  ASSERT_EQ(want_x.size(), want.size() + 1);
  std::vector<int> wrong(2, 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < wrong.size(); ++k)
    threads.emplace_back([&, k] {
      for (int i = 0; i < 200; ++i)
        wrong[k] += t.tokenize_ids(i % 2 ? text + " x" : text) != (i % 2 ? want_x : want);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, (std::vector<int>{0, 0}));
}

// ---- Hugging Face goldens over the real vocab (skipped without the shared data). ----

// The generator's hash: FNV-1a 64 over input ids as u32 little-endian, then type ids as u8.
std::string fnv1a64(const Encoding& e) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto byte = [&](uint8_t b) {
    h ^= b;
    h *= 0x100000001b3ull;
  };
  for (const int64_t id : e.input_ids)
    for (int k = 0; k < 4; ++k) byte(static_cast<uint8_t>((static_cast<uint32_t>(id) >> (8 * k)) & 0xff));
  for (const int64_t t : e.token_type_ids) byte(static_cast<uint8_t>(t));
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path << " (HINT: tools/golden/gen_tokenizer.py)";
  return nlohmann::json::parse(in);
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string joined(const WordPieceTokenizer& t, const Ids& ids) {
  std::string s;
  for (const int64_t id : ids) s += (s.empty() ? "" : " ") + t.id_to_token(id);
  return s;
}

class TokenizerGoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string data = testing::shared_data_dir();
    const std::string vocab = data + "/bert-base-uncased/vocab.txt";
    if (data.empty() || !fs::is_regular_file(vocab))
      GTEST_SKIP() << "shared data (bert-base-uncased/vocab.txt) absent";
    data_ = data;
    tok_ = std::make_unique<WordPieceTokenizer>(WordPieceTokenizer::from_vocab_file(vocab));
  }
  std::string data_;
  std::unique_ptr<WordPieceTokenizer> tok_;
};

TEST_F(TokenizerGoldenTest, HandMadeTextsMatchBertTokenizerFast) {
  const auto j = read_json(testing::fixture_path("tokenizer_golden.json"));
  ASSERT_EQ(tok_->vocab_size(), 30522);
  int checked = 0;
  for (const auto& c : j.at("cases")) {
    auto text = [&](const char* key) -> std::optional<std::string> {
      if (c.contains(key)) return c[key].get<std::string>();
      if (c.contains(std::string(key) + "_hex")) return from_hex(c[std::string(key) + "_hex"]);
      return std::nullopt;
    };
    const auto a = text("a"), b = text("b");
    const Encoding e = tok_->encode(*a, b ? &*b : nullptr, c.at("max_len").get<int64_t>());
    const Ids want = c.at("input_ids").get<Ids>();
    EXPECT_EQ(e.input_ids, want) << c["name"].get<std::string>() << "\n  ours: "
                                 << joined(*tok_, e.input_ids) << "\n  HF:   "
                                 << joined(*tok_, want);
    EXPECT_EQ(e.token_type_ids, c.at("token_type_ids").get<Ids>()) << c["name"];
    std::string tokens;
    for (const auto& s : c.at("tokens")) tokens += (tokens.empty() ? "" : " ") + s.get<std::string>();
    EXPECT_EQ(joined(*tok_, want), tokens) << c["name"];
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

// A GLUE TSV's text columns, read as the generator does (tab-separated, no quoting, MRPC's
// UTF-8 BOM dropped, blank lines skipped).
std::vector<Strings> read_tsv_columns(const std::string& path, bool header,
                                      const nlohmann::json& columns) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string all = ss.str();
  if (all.rfind("\xEF\xBB\xBF", 0) == 0) all.erase(0, 3);
  std::vector<Strings> rows;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    Strings fields;
    size_t start = 0;
    for (size_t tab; (tab = line.find('\t', start)) != std::string::npos; start = tab + 1)
      fields.push_back(line.substr(start, tab - start));
    fields.push_back(line.substr(start));
    rows.push_back(std::move(fields));
  }
  std::vector<size_t> idx;
  size_t first = 0;
  for (const auto& col : columns) {
    if (!header) {
      idx.push_back(col.get<size_t>());
      continue;
    }
    const auto& names = rows.at(0);
    const auto it = std::find(names.begin(), names.end(), col.get<std::string>());
    EXPECT_NE(it, names.end()) << path << " has no column " << col;
    idx.push_back(static_cast<size_t>(it - names.begin()));
    first = 1;
  }
  std::vector<Strings> out;
  for (size_t r = first; r < rows.size(); ++r) {
    Strings texts;
    for (const size_t i : idx) texts.push_back(rows[r].at(i));
    out.push_back(std::move(texts));
  }
  return out;
}

TEST_F(TokenizerGoldenTest, GlueDevSetsMatchBertTokenizerFast) {
  if (!fs::is_directory(data_ + "/glue")) GTEST_SKIP() << "shared GLUE data absent";
  const auto j = read_json(testing::fixture_path("tokenizer_glue.json"));
  const int64_t max_len = j.at("max_length");
  int64_t total = 0, mismatched = 0;
  for (const auto& [task, g] : j.at("tasks").items()) {
    const auto rows = read_tsv_columns(data_ + "/" + g.at("file").get<std::string>(),
                                       g.at("header").get<bool>(), g.at("columns"));
    ASSERT_EQ(static_cast<int64_t>(rows.size()), g.at("count").get<int64_t>()) << task;
    const std::string hashes = g.at("hashes");
    const auto lengths = g.at("lengths").get<Ids>();
    const auto& examples = g.at("examples");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Encoding e =
          tok_->encode(rows[i][0], rows[i].size() > 1 ? &rows[i][1] : nullptr, max_len);
      ++total;
      if (i < examples.size()) {
        EXPECT_EQ(e.input_ids, examples[i].at("input_ids").get<Ids>()) << task << " #" << i;
        EXPECT_EQ(e.token_type_ids, examples[i].at("token_type_ids").get<Ids>()) << task << " #" << i;
      }
      const bool same = static_cast<int64_t>(e.input_ids.size()) == lengths.at(i) &&
                        fnv1a64(e) == hashes.substr(16 * i, 16);
      if (!same) {
        ++mismatched;
        ADD_FAILURE() << task << " #" << i << " differs from HF: \"" << rows[i][0] << "\"\n  ours: "
                      << joined(*tok_, e.input_ids);
      }
    }
  }
  EXPECT_EQ(total, 4171);
  EXPECT_EQ(mismatched, 0) << "of " << total;
}

}  // namespace
}  // namespace lb::data
