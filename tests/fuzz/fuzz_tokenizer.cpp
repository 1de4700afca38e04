// libFuzzer harness: the BERT tokenizer (basic tokenization through utf8proc + WordPiece, pair
// encoding with truncation) on arbitrary bytes, uncased and cased. Input: byte 0 = max_len,
// then text a, a tab, text b (no tab: a single sentence). Invalid UTF-8 must be an lb::Error
// or replaced, never a crash.
#include <string>

#include "lb/data/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

#ifndef LB_FIXTURES_DIR
#error "LB_FIXTURES_DIR must name tests/fixtures"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using lb::data::WordPieceTokenizer;
  static const WordPieceTokenizer uncased =
      WordPieceTokenizer::from_vocab_file(LB_FIXTURES_DIR "/tokenizer_tiny_vocab.txt", true);
  static const WordPieceTokenizer cased =
      WordPieceTokenizer::from_vocab_file(LB_FIXTURES_DIR "/tokenizer_tiny_vocab.txt", false);
  if (size < 1) return 0;
  const int64_t max_len = data[0] % 64;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t tab = text.find('\t');
  const std::string a = text.substr(0, tab);
  const std::string b = tab == std::string::npos ? "" : text.substr(tab + 1);
  for (const WordPieceTokenizer* t : {&uncased, &cased}) {
    lb::fuzz::expect_clean([&] {
      const auto e = t->encode(a, tab == std::string::npos ? nullptr : &b, max_len);
      for (int64_t id : e.input_ids)
        if (id < 0 || id >= t->vocab_size()) __builtin_trap();  // ids must be in the vocabulary
      if (max_len >= 3 && static_cast<int64_t>(e.input_ids.size()) > max_len) __builtin_trap();
    });
  }
  return 0;
}
