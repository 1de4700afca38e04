// BERT's tokenizer: basic normalisation and splitting, then greedy longest-match-first
// WordPiece, with ids equal to Hugging Face BertTokenizerFast (tokenizers' BertNormalizer +
// BertPreTokenizer + WordPiece + the [CLS] a [SEP] b [SEP] template, longest_first truncation).
//
// Pipeline for one text (the order is the Rust BertNormalizer's, which differs from the slow
// Python BertTokenizer: accents are stripped before lowercasing):
//   1. the special tokens present in the vocab ([PAD] [UNK] [CLS] [SEP] [MASK]) are matched
//      verbatim (case-sensitive) in the raw text and map to their ids, as HF's added tokens
//      with normalized=false;
//   2. every other stretch: drop U+0000, U+FFFD and Cc/Cf/Co characters except \t \n \r,
//      map whitespace (\t \n \r, Zs, Zl, Zp) to ' ', put spaces around CJK ideographs
//      (tokenizers' ranges);
//   3. strip accents (NFD, then drop Mn) when strip_accents (default: = do_lower_case), then
//      lowercase (Unicode simple lowercase, plus İ -> i U+0307 as Rust's char::to_lowercase);
//   4. split on spaces and punctuation (ASCII punctuation or Unicode P*), each punctuation
//      character its own word;
//   5. WordPiece: a word over 100 code points, or one with no full match, becomes [UNK].
// Invalid UTF-8 bytes decode to U+FFFD, which step 2 drops (as HF does for text decoded
// with errors="replace"). Unicode tables are utf8proc's (Unicode 15); HF's categories come
// from an older table, so marks/punctuation assigned after that differ (basic_tokenizer.cpp).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lb::data {

struct Encoding {
  std::vector<int64_t> input_ids;       // [CLS] a [SEP] (b [SEP])
  std::vector<int64_t> token_type_ids;  // 0 for a's part, 1 for b's
};

// Normalisation switches, as in HF's BertNormalizer / tokenizer_config.json.
struct BasicTokenizerOptions {
  bool lowercase = true;
  bool strip_accents = true;  // HF's strip_accents=None means "= lowercase"
  bool tokenize_chinese_chars = true;
};

class WordPieceTokenizer {
 public:
  // vocab.txt (one token per line, id = line number). do_lower_case also strips accents (as
  // HF when strip_accents is unset).
  static WordPieceTokenizer from_vocab_file(const std::string& vocab_path,
                                            bool do_lower_case = true);
  // A Hugging Face model/tokenizer directory: vocab.txt, plus do_lower_case / strip_accents /
  // tokenize_chinese_chars from tokenizer_config.json when present (default uncased).
  static WordPieceTokenizer from_dir(const std::string& dir);
  // A directory (from_dir) or a vocab file (from_vocab_file, uncased): what the CLI's --vocab
  // takes.
  static WordPieceTokenizer from_path(const std::string& dir_or_vocab_file);
  // Full control over the normalisation switches.
  static WordPieceTokenizer from_vocab_file(const std::string& vocab_path,
                                            const BasicTokenizerOptions& options);

  std::vector<std::string> tokenize(const std::string& text) const;  // wordpieces
  std::vector<int64_t> tokenize_ids(const std::string& text) const;  // ids of tokenize(), no specials
  // Pair encoding with longest-first truncation of the two texts (HF's "longest_first") so the
  // result has at most max_len ids including specials; max_len <= 0 means no truncation.
  // b == nullptr: single sentence. An empty *b is still a pair ([CLS] a [SEP] [SEP]), as in
  // tokenizers' Tokenizer.encode (transformers' __call__ drops an empty text_pair instead).
  Encoding encode(const std::string& a, const std::string* b, int64_t max_len) const;
  // Same, from already tokenized ids (the trainer tokenizes each text once and may
  // re-truncate). A max_len below the number of specials (2 single, 3 pair) throws.
  Encoding encode_ids(const std::vector<int64_t>& a, const std::vector<int64_t>* b,
                      int64_t max_len) const;

  int64_t vocab_size() const;
  int64_t pad_id() const;
  int64_t cls_id() const;
  int64_t sep_id() const;
  int64_t unk_id() const;
  int64_t mask_id() const;  // -1 when the vocab has no [MASK]
  int64_t token_to_id(const std::string& t) const;  // -1 if absent
  const std::string& id_to_token(int64_t id) const;
  bool do_lower_case() const;
  const BasicTokenizerOptions& options() const;

 private:
  struct Impl;
  explicit WordPieceTokenizer(std::shared_ptr<const Impl> impl);
  // Appends the ids of text's wordpieces; with tokens, also their strings.
  void run(const std::string& text, std::vector<int64_t>& ids,
           std::vector<std::string>* tokens) const;
  std::shared_ptr<const Impl> impl_;  // immutable, so copies share it and threads may too
};

}  // namespace lb::data
