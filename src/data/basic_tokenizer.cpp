// BERT basic tokenizer (see basic_tokenizer.h): two passes over a text's code points.
// Pass 1 does what HF's BertNormalizer does before lowercasing: clean, space out CJK, NFD
// (canonical decomposition, then canonical ordering of combining marks). Pass 2 drops Mn
// marks, lowercases and splits into words, as the normalised string is what
// BertPreTokenizer sees. ASCII takes a fast path: it has no decomposition or marks.
//
// Known residual differences from HF (none in the GLUE dev sets, see tokenizer_test.cpp):
// HF's control/mark/punctuation classes come from the Rust unicode_categories crate, whose
// table is old (Unicode 8.0, judging by which marks it knows), while utf8proc's is Unicode
// 15.0. Characters assigned since are ordinary letters to HF (kept, not split off, not
// stripped) but get their Unicode 15 class here: e.g. U+0B55 and U+1AC1 (Mn) are stripped,
// U+061D and U+2E55 (P*) split off; a few were recategorised (U+166D Po -> So, U+1734
// Mn -> Mc). A sweep of every code point of planes 0-2 and 14 ("x{c}y A{c} {c}{c}b") against
// BertTokenizerFast differs on 568 of 391040 code points, all of this kind.
#include "basic_tokenizer.h"

#include <utf8proc.h>

namespace lb::data {

namespace {

// Pass 1's output, reused across calls so tokenizing allocates nothing in steady state.
thread_local std::vector<int32_t> t_codepoints;

bool is_ascii_punct(int32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
         (c >= 123 && c <= 126);
}

// The CJK Unified Ideographs blocks of BERT's _is_chinese_char (not kana or hangul), as
// tokenizers' Rust is_chinese_char has them: its Extension E range starts at 0x2B920, not at
// 0x2B820 as in the Python original, so U+2B820..U+2B91F are not spaced out (checked
// against BertTokenizerFast code point by code point).
bool is_cjk_ideograph(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_space_category(int cat) {
  return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL ||
         cat == UTF8PROC_CATEGORY_ZP;
}

bool is_punct_category(int cat) {
  return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

// Appends c keeping canonical order: a mark with combining class k moves before preceding
// marks of class > k (stable, stopping at a starter), as NFD requires.
void push_canonical(std::vector<int32_t>& out, int32_t c) {
  out.push_back(c);
  const int ccc = utf8proc_get_property(c)->combining_class;
  if (ccc == 0) return;
  for (size_t j = out.size() - 1; j > 0; --j) {
    const int prev = utf8proc_get_property(out[j - 1])->combining_class;
    if (prev <= ccc) break;
    std::swap(out[j - 1], out[j]);
  }
}

// Pass 2's word building.
class WordBuilder {
 public:
  explicit WordBuilder(WordSpans& out) : out_(out), begin_(out.bytes.size()) {}
  void end_word() {
    const auto end = static_cast<uint32_t>(out_.bytes.size());
    if (chars_ > 0) out_.spans.push_back({begin_, end, chars_});
    begin_ = end;
    chars_ = 0;
  }
  void append_ascii(char c) {
    out_.bytes.push_back(c);
    ++chars_;
  }
  void append(int32_t c) {
    utf8proc_uint8_t buf[4];
    const auto n = utf8proc_encode_char(c, buf);
    out_.bytes.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
    ++chars_;
  }
  void punctuation(int32_t c) {
    end_word();
    append(c);
    end_word();
  }

 private:
  WordSpans& out_;
  uint32_t begin_;
  uint32_t chars_ = 0;
};

// One already-lowercased non-ASCII character into the words.
void emit_non_ascii(WordBuilder& words, int32_t c) {
  const int cat = utf8proc_get_property(c)->category;
  if (is_space_category(cat)) words.end_word();
  else if (is_punct_category(cat)) words.punctuation(c);
  else words.append(c);
}

}  // namespace

void BasicTokenizer::split(std::string_view text, WordSpans& out) const {
  const bool strip = options_.strip_accents, lower = options_.lowercase;
  std::vector<int32_t>& cps = t_codepoints;
  cps.clear();
  cps.reserve(text.size() + 2);

  // Pass 1: clean (drop NUL, U+FFFD, Cc/Cf/Co except \t \n \r; whitespace -> ' '), space
  // out CJK ideographs, decompose.
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const auto n = static_cast<utf8proc_ssize_t>(text.size());
  utf8proc_int32_t decomposed[32];  // longest canonical decomposition is 4; Hangul 3
  for (utf8proc_ssize_t i = 0; i < n;) {
    if (p[i] < 0x80) {
      const int32_t c = p[i++];
      if (c >= 0x20 && c != 0x7F) cps.push_back(c);
      else if (c == '\t' || c == '\n' || c == '\r') cps.push_back(' ');
      continue;
    }
    utf8proc_int32_t c;
    const utf8proc_ssize_t len = utf8proc_iterate(p + i, n - i, &c);
    if (len < 0) {  // invalid byte: U+FFFD, which cleaning drops
      ++i;
      continue;
    }
    i += len;
    const int cat = utf8proc_get_property(c)->category;
    if (c == 0xFFFD || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
        cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS)
      continue;
    if (is_space_category(cat)) {
      cps.push_back(' ');
      continue;
    }
    const bool cjk = options_.tokenize_chinese_chars && is_cjk_ideograph(c);
    if (cjk) cps.push_back(' ');
    if (!strip) {
      cps.push_back(c);
    } else {
      int boundclass = 0;
      const utf8proc_ssize_t m =
          utf8proc_decompose_char(c, decomposed, 32, UTF8PROC_DECOMPOSE, &boundclass);
      for (utf8proc_ssize_t k = 0; k < m; ++k) push_canonical(cps, decomposed[k]);
    }
    if (cjk) cps.push_back(' ');
  }

  // Pass 2: drop Mn (when stripping accents), lowercase, split on spaces and punctuation.
  WordBuilder words(out);
  for (const int32_t c : cps) {
    if (c < 0x80) {
      if (c == ' ') {
        words.end_word();
      } else if (is_ascii_punct(c)) {
        words.punctuation(c);
      } else {
        words.append_ascii(static_cast<char>(lower && c >= 'A' && c <= 'Z' ? c + 32 : c));
      }
      continue;
    }
    if (strip && utf8proc_get_property(c)->category == UTF8PROC_CATEGORY_MN) continue;
    if (!lower) {
      emit_non_ascii(words, c);
    } else if (c == 0x130) {
      // Rust's char::to_lowercase is the full mapping: İ -> i + combining dot above (with
      // accent stripping the NFD already made it I + U+0307 and dropped the mark).
      words.append_ascii('i');
      words.append(0x307);
    } else {
      const int32_t lc = utf8proc_tolower(c);
      if (lc < 0x80) words.append_ascii(static_cast<char>(lc));  // e.g. K (Kelvin) -> k
      else emit_non_ascii(words, lc);
    }
  }
  words.end_word();
}

}  // namespace lb::data
