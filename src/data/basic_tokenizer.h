// BERT's basic tokenizer: the text normalisation of HF's Rust BertNormalizer (clean text,
// space out CJK ideographs, strip accents, lowercase) and the splitting of BertPreTokenizer
// (on whitespace and punctuation), producing the words that WordPiece then cuts. Internal to
// the tokenizer (see lb/data/tokenizer.h for the rules as a whole).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lb/data/tokenizer.h"

namespace lb::data {

// The words of a text: their normalised UTF-8 concatenated in `bytes`, one span per word.
struct WordSpans {
  struct Span {
    uint32_t begin, end;  // byte range in `bytes`
    uint32_t chars;       // code points, for WordPiece's 100-character limit
  };
  std::string bytes;
  std::vector<Span> spans;
  void clear() {
    bytes.clear();
    spans.clear();
  }
  std::string_view word(const Span& s) const {
    return std::string_view(bytes).substr(s.begin, s.end - s.begin);
  }
};

class BasicTokenizer {
 public:
  explicit BasicTokenizer(const BasicTokenizerOptions& options) : options_(options) {}
  // Appends text's words to out. Invalid UTF-8 bytes are dropped (HF decodes them to U+FFFD,
  // which cleaning removes). Thread-safe: scratch space is thread_local.
  void split(std::string_view text, WordSpans& out) const;
  const BasicTokenizerOptions& options() const { return options_; }

 private:
  BasicTokenizerOptions options_;
};

}  // namespace lb::data
