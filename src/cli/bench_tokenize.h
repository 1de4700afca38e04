// `leanback bench tokenize`: single-threaded WordPiece throughput (text -> ids, no specials)
// over the sentences of a GLUE TSV (SST-2 train.tsv: the `sentence` column). The PyPI twin is
// tools/bench/tokenizer_hf.py (BertTokenizerFast on the same sentences, same JSON fields).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace lb::cli {

// One untimed pass, then `iters` timed passes over every sentence. Returns
// {"workload":"tokenize", "tokens_per_s", "texts" (per pass), "tokens" (wordpieces per pass),
//  "ms" (median pass), "iters", "threads":1}.
nlohmann::json bench_tokenize(const std::string& vocab_dir_or_file, const std::string& tsv_path,
                              int iters);

}  // namespace lb::cli
