// make_synthetic_text (see synthetic_text.h).
#include "lb/data/synthetic_text.h"

#include "lb/core/philox.h"

namespace lb::data {

namespace {
const std::vector<std::string> kPositive = {"good", "great", "fine", "happy", "love",
                                            "excellent", "superb", "nice", "bright", "calm"};
const std::vector<std::string> kNegative = {"bad", "awful", "poor", "sad", "hate",
                                            "terrible", "dull", "ugly", "grim", "noisy"};
constexpr int kFiller = 300;

std::string filler(int64_t i) {
  std::string w = std::to_string(i);
  w.insert(w.begin(), 'w');  // (not "w" + ...: GCC 12 warns falsely on that)
  return w;
}

void make_split(int64_t n, PhiloxStream& rng, std::vector<std::string>& text,
                std::vector<int64_t>& labels) {
  auto pick = [&](int64_t k) { return static_cast<int64_t>(rng.next_u32() % static_cast<uint32_t>(k)); };
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = pick(2);
    const int64_t sentiment = pick(2) == 0 ? 1 : 3;  // odd, so the majority is defined
    // With three words, one may disagree with the label.
    const int64_t against = sentiment == 3 ? pick(2) : 0;
    const int64_t length = 6 + pick(15);
    std::vector<std::string> words;
    for (int64_t w = 0; w < length; ++w) words.push_back(filler(pick(kFiller)));
    for (int64_t s = 0; s < sentiment; ++s) {
      const bool positive = (s < against) ? label == 0 : label == 1;
      const auto& pool = positive ? kPositive : kNegative;
      const int64_t at = pick(static_cast<int64_t>(words.size()) + 1);
      words.insert(words.begin() + at, pool[pick(static_cast<int64_t>(pool.size()))]);
    }
    std::string line;
    for (size_t w = 0; w < words.size(); ++w) line += (w ? " " : "") + words[w];
    if (pick(3) == 0) line += " .";
    text.push_back(line);
    labels.push_back(label);
  }
}
}  // namespace

SyntheticText make_synthetic_text(int64_t num_train, int64_t num_eval, uint64_t seed) {
  SyntheticText s;
  s.vocab = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "."};
  for (const auto& w : kPositive) s.vocab.push_back(w);
  for (const auto& w : kNegative) s.vocab.push_back(w);
  for (int i = 0; i < kFiller; ++i) s.vocab.push_back(filler(i));
  PhiloxStream train_rng(seed, 0), eval_rng(seed, 1);
  make_split(num_train, train_rng, s.train_text, s.train_labels);
  make_split(num_eval, eval_rng, s.eval_text, s.eval_labels);
  return s;
}

}  // namespace lb::data
