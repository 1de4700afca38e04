// WordPiece over the basic tokenizer's words, special tokens matched in the raw text, and the
// [CLS] a [SEP] b [SEP] encoding with HF tokenizers' longest_first truncation (see
// tokenizer.h). Vocab lookups are flat hash tables of views into the token strings
// (vocab_table.h), one for word-initial pieces and one for "##" pieces keyed without the
// prefix, so WordPiece looks up substrings of the word in place.
#include "lb/data/tokenizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "basic_tokenizer.h"
#include "vocab_table.h"
#include "lb/core/error.h"
#include "lb/io/json_file.h"
#include "lb/io/printable.h"

namespace lb::data {

namespace {

constexpr std::string_view kContinuation = "##";
constexpr uint32_t kMaxInputCharsPerWord = 100;  // HF WordPiece's max_input_chars_per_word

thread_local WordSpans t_words;

// The file's lines, id = line number (0-based); "\n" and a trailing "\r" are not part of a
// token, nor is a UTF-8 BOM at the start of the file (an editor's, which made "[PAD]" the
// unknown "\uFEFF[PAD]"). Each line must be valid UTF-8 and unique.
std::vector<std::string> read_vocab_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LB_CHECK(in.good(), "cannot open vocab file ", path,
           " (HINT: a BERT vocab.txt, one wordpiece per line)");
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    if (tokens.empty() && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(line.data());
    for (size_t i = 0; i < line.size();) {
      utf8proc_int32_t c;
      const auto len = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(line.size() - i), &c);
      LB_CHECK(len > 0, path, ":", tokens.size() + 1, ": invalid UTF-8 at byte ", i,
               " of the token");
      i += static_cast<size_t>(len);
    }
    tokens.push_back(std::move(line));
  }
  return tokens;
}

}  // namespace

struct WordPieceTokenizer::Impl {
  BasicTokenizer basic;
  std::vector<std::string> tokens;
  VocabTable initial;       // "abc" -> id
  VocabTable continuation;  // "##abc" keyed as "abc"
  int64_t pad = -1, unk = -1, cls = -1, sep = -1, mask = -1;
  std::vector<std::pair<std::string_view, int32_t>> specials;  // matched verbatim in raw text

  Impl(std::vector<std::string> vocab, const BasicTokenizerOptions& options,
       const std::string& path)
      : basic(options), tokens(std::move(vocab)) {
    std::vector<std::pair<std::string_view, int32_t>> initial_keys, continuation_keys;
    std::unordered_map<std::string_view, int32_t> all;  // for the duplicate check
    all.reserve(tokens.size());
    for (size_t id = 0; id < tokens.size(); ++id) {
      const std::string_view t = tokens[id];
      const auto [it, fresh] = all.emplace(t, static_cast<int32_t>(id));
      LB_CHECK(fresh, path, ":", id + 1, ": duplicate token '", io::printable(t), "' (first on line ",
               it->second + 1, ")");
      if (t.size() > kContinuation.size() && t.substr(0, kContinuation.size()) == kContinuation)
        continuation_keys.emplace_back(t.substr(kContinuation.size()), static_cast<int32_t>(id));
      else
        initial_keys.emplace_back(t, static_cast<int32_t>(id));
    }
    initial.build(initial_keys);
    continuation.build(continuation_keys);
    auto required = [&](const char* name) -> int64_t {
      const auto it = all.find(name);
      LB_CHECK(it != all.end(), "vocab file ", path, " has no ", name,
               " token (HINT: BERT vocabularies list [PAD], [UNK], [CLS], [SEP] and [MASK])");
      return it->second;
    };
    pad = required("[PAD]");
    unk = required("[UNK]");
    cls = required("[CLS]");
    sep = required("[SEP]");
    if (const auto it = all.find("[MASK]"); it != all.end()) mask = it->second;
    for (const int64_t id : {pad, unk, cls, sep, mask})
      if (id >= 0) specials.emplace_back(tokens[static_cast<size_t>(id)], static_cast<int32_t>(id));
  }

  // Greedy longest-match-first over one word: pieces after the first carry "##". A word over
  // 100 code points, or one with a stretch no piece matches, is a single [UNK].
  void wordpiece(std::string_view word, uint32_t chars, std::vector<int64_t>& ids,
                 std::vector<std::string>* pieces) const {
    const size_t mark = ids.size();
    auto unknown = [&] {
      ids.resize(mark);
      ids.push_back(unk);
      if (pieces) pieces->resize(mark), pieces->push_back(tokens[static_cast<size_t>(unk)]);
    };
    if (chars > kMaxInputCharsPerWord) return unknown();
    auto is_continuation_byte = [&](size_t i) {
      return (static_cast<unsigned char>(word[i]) & 0xC0) == 0x80;
    };
    for (size_t start = 0; start < word.size();) {
      const VocabTable& table = start == 0 ? initial : continuation;
      // No piece is longer than the longest token: start there, on a character boundary.
      size_t end = std::min(word.size(), start + table.max_len());
      while (end > start && end < word.size() && is_continuation_byte(end)) --end;
      int32_t id = -1;
      while (end > start) {
        id = table.find(word.substr(start, end - start));
        if (id >= 0) break;
        do --end;
        while (end > start && is_continuation_byte(end));
      }
      if (id < 0) return unknown();
      ids.push_back(id);
      if (pieces) pieces->push_back(tokens[static_cast<size_t>(id)]);
      start = end;
    }
  }

  void basic_and_wordpiece(std::string_view text, std::vector<int64_t>& ids,
                           std::vector<std::string>* pieces) const {
    if (text.empty()) return;
    WordSpans& words = t_words;
    words.clear();
    basic.split(text, words);
    for (const auto& s : words.spans) wordpiece(words.word(s), s.chars, ids, pieces);
  }
};

WordPieceTokenizer::WordPieceTokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& vocab_path,
                                                       const BasicTokenizerOptions& options) {
  return WordPieceTokenizer(
      std::make_shared<const Impl>(read_vocab_lines(vocab_path), options, vocab_path));
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& vocab_path,
                                                       bool do_lower_case) {
  BasicTokenizerOptions o;
  o.lowercase = do_lower_case;
  o.strip_accents = do_lower_case;
  return from_vocab_file(vocab_path, o);
}

WordPieceTokenizer WordPieceTokenizer::from_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  const fs::path vocab = fs::path(dir) / "vocab.txt";
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  LB_CHECK(fs::is_regular_file(vocab), "tokenizer directory ", dir, " has no vocab.txt");
  BasicTokenizerOptions o;
  if (fs::is_regular_file(config)) {
    const nlohmann::json j = io::read_json_file(config.string());
    LB_CHECK(j.is_object(), config.string(), ": expected a JSON object");
    // Only the normalisation switches matter here; HF configs carry many other keys.
    auto flag = [&](const char* key, bool def) {
      if (!j.contains(key) || j[key].is_null()) return def;
      LB_CHECK(j[key].is_boolean(), config.string(), ": ", key, " must be true, false or null, got ",
               j[key].dump());
      return j[key].get<bool>();
    };
    o.lowercase = flag("do_lower_case", true);
    o.strip_accents = flag("strip_accents", o.lowercase);
    o.tokenize_chinese_chars = flag("tokenize_chinese_chars", true);
  }
  return from_vocab_file(vocab.string(), o);
}

WordPieceTokenizer WordPieceTokenizer::from_path(const std::string& dir_or_vocab_file) {
  if (std::filesystem::is_directory(dir_or_vocab_file)) return from_dir(dir_or_vocab_file);
  return from_vocab_file(dir_or_vocab_file, true);
}

void WordPieceTokenizer::run(const std::string& text, std::vector<int64_t>& ids,
                             std::vector<std::string>* pieces) const {
  const Impl& m = *impl_;
  const std::string_view t = text;
  size_t stretch = 0;  // start of the text not yet tokenized
  for (size_t pos = t.find('['); pos != std::string_view::npos; pos = t.find('[', pos)) {
    const std::pair<std::string_view, int32_t>* hit = nullptr;  // leftmost-longest, as HF
    for (const auto& s : m.specials)
      if (t.compare(pos, s.first.size(), s.first) == 0 && (!hit || s.first.size() > hit->first.size()))
        hit = &s;
    if (!hit) {
      ++pos;
      continue;
    }
    m.basic_and_wordpiece(t.substr(stretch, pos - stretch), ids, pieces);
    ids.push_back(hit->second);
    if (pieces) pieces->emplace_back(hit->first);
    pos += hit->first.size();
    stretch = pos;
  }
  m.basic_and_wordpiece(t.substr(stretch), ids, pieces);
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<int64_t> ids;
  std::vector<std::string> pieces;
  run(text, ids, &pieces);
  return pieces;
}

std::vector<int64_t> WordPieceTokenizer::tokenize_ids(const std::string& text) const {
  std::vector<int64_t> ids;
  run(text, ids, nullptr);
  return ids;
}

Encoding WordPieceTokenizer::encode(const std::string& a, const std::string* b,
                                    int64_t max_len) const {
  if (!b) return encode_ids(tokenize_ids(a), nullptr, max_len);
  const std::vector<int64_t> ib = tokenize_ids(*b);
  return encode_ids(tokenize_ids(a), &ib, max_len);
}

Encoding WordPieceTokenizer::encode_ids(const std::vector<int64_t>& a,
                                        const std::vector<int64_t>* b, int64_t max_len) const {
  auto na = static_cast<int64_t>(a.size());
  int64_t nb = b ? static_cast<int64_t>(b->size()) : 0;
  if (max_len > 0) {
    const int64_t num_specials = b ? 3 : 2;
    LB_CHECK(max_len >= num_specials, "encode: max_len ", max_len, " leaves no room for the ",
             num_specials, " special tokens of a ", b ? "pair" : "single text");
    const int64_t budget = max_len - num_specials;
    if (na + nb > budget) {
      if (!b) {
        na = budget;
      } else {
        // tokenizers' truncate_encodings (LongestFirst): the shorter text keeps its length if
        // the longer can take the rest; otherwise each gets half, the longer the odd one
        // (a on a tie gets the smaller half).
        const bool swap = na > nb;
        int64_t n1 = swap ? nb : na, n2;
        n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
        if (n1 + n2 > budget) {
          n1 = budget / 2;
          n2 = n1 + budget % 2;
        }
        if (swap) std::swap(n1, n2);
        na = std::min(na, n1);
        nb = std::min(nb, n2);
      }
    }
  }
  Encoding e;
  const size_t total = static_cast<size_t>(na + nb) + (b ? 3 : 2);
  e.input_ids.reserve(total);
  e.token_type_ids.reserve(total);
  e.input_ids.push_back(impl_->cls);
  e.input_ids.insert(e.input_ids.end(), a.begin(), a.begin() + na);
  e.input_ids.push_back(impl_->sep);
  e.token_type_ids.assign(e.input_ids.size(), 0);
  if (b) {
    e.input_ids.insert(e.input_ids.end(), b->begin(), b->begin() + nb);
    e.input_ids.push_back(impl_->sep);
    e.token_type_ids.resize(e.input_ids.size(), 1);
  }
  return e;
}

int64_t WordPieceTokenizer::vocab_size() const { return static_cast<int64_t>(impl_->tokens.size()); }
int64_t WordPieceTokenizer::pad_id() const { return impl_->pad; }
int64_t WordPieceTokenizer::cls_id() const { return impl_->cls; }
int64_t WordPieceTokenizer::sep_id() const { return impl_->sep; }
int64_t WordPieceTokenizer::unk_id() const { return impl_->unk; }
int64_t WordPieceTokenizer::mask_id() const { return impl_->mask; }
bool WordPieceTokenizer::do_lower_case() const { return impl_->basic.options().lowercase; }
const BasicTokenizerOptions& WordPieceTokenizer::options() const {
  return impl_->basic.options();
}

int64_t WordPieceTokenizer::token_to_id(const std::string& t) const {
  const Impl& m = *impl_;
  const std::string_view v = t;
  if (v.size() > kContinuation.size() && v.substr(0, kContinuation.size()) == kContinuation) {
    return m.continuation.find(v.substr(kContinuation.size()));
  }
  return m.initial.find(v);
}

const std::string& WordPieceTokenizer::id_to_token(int64_t id) const {
  LB_CHECK(id >= 0 && id < vocab_size(), "id_to_token: id ", id, " is outside the vocab [0, ",
           vocab_size(), ")");
  return impl_->tokens[static_cast<size_t>(id)];
}

}  // namespace lb::data
