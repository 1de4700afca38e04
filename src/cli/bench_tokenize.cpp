// Tokenizer throughput (see bench_tokenize.h). The sentences are read up front so only
// tokenization is timed; each pass tokenizes every sentence once on this thread.
#include "src/cli/bench_tokenize.h"

#include <algorithm>
#include <fstream>

#include "lb/core/error.h"
#include "lb/data/tokenizer.h"
#include "src/cli/bench_workloads.h"

namespace lb::cli {

namespace {

// The `sentence` column of a tab-separated file with a header (no quoting, as GLUE).
std::vector<std::string> read_sentences(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LB_CHECK(in.good(), "cannot open ", path, " (HINT: SST-2's train.tsv)");
  std::string line;
  LB_CHECK(static_cast<bool>(std::getline(in, line)), path, ": empty file");
  auto split = [](const std::string& s) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t tab; (tab = s.find('\t', start)) != std::string::npos; start = tab + 1)
      f.push_back(s.substr(start, tab - start));
    f.push_back(s.substr(start));
    return f;
  };
  const auto header = split(line);
  const auto it = std::find(header.begin(), header.end(), "sentence");
  LB_CHECK(it != header.end(), path, ":1: no 'sentence' column in the header");
  const auto col = static_cast<size_t>(it - header.begin());
  std::vector<std::string> out;
  for (int64_t n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    auto fields = split(line);
    LB_CHECK(fields.size() > col, path, ":", n, ": ", fields.size(), " fields, need ", col + 1);
    out.push_back(std::move(fields[col]));
  }
  return out;
}

}  // namespace

nlohmann::json bench_tokenize(const std::string& vocab_dir_or_file, const std::string& tsv_path,
                              int iters) {
  LB_CHECK(iters >= 1, "bench tokenize: iters must be >= 1, got ", iters);
  const auto tok = data::WordPieceTokenizer::from_path(vocab_dir_or_file);
  const auto texts = read_sentences(tsv_path);
  std::vector<double> ms;
  int64_t tokens = 0;
  for (int it = -1; it < iters; ++it) {  // it == -1: warm-up
    int64_t n = 0;
    const auto t0 = BenchClock::now();
    for (const auto& s : texts) n += static_cast<int64_t>(tok.tokenize_ids(s).size());
    const auto t1 = BenchClock::now();
    if (it >= 0) ms.push_back(ms_since(t0, t1));
    tokens = n;
  }
  const double med = median(ms);
  return {{"workload", "tokenize"},
          {"tokens_per_s", med > 0 ? static_cast<double>(tokens) / (med / 1e3) : 0.0},
          {"texts", static_cast<int64_t>(texts.size())},
          {"tokens", tokens},
          {"ms", med},
          {"iters", iters},
          {"threads", 1}};
}

}  // namespace lb::cli
