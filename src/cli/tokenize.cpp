// `leanback tokenize` (see tokenize.h): the tokenizer the trainer uses, on text from stdin, so
// its ids can be compared with any other implementation line by line.
#include "src/cli/tokenize.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/data/tokenizer.h"
#include "src/cli/commands.h"

namespace lb::cli {

int cmd_tokenize(const std::vector<std::string>& args, std::istream& in, std::ostream& out) {
  CLI::App app{"Tokenize stdin with BERT WordPiece (ids equal to Hugging Face BertTokenizerFast):"
               " one line in, one JSON line {\"input_ids\":[...],\"token_type_ids\":[...]} out.",
               "leanback tokenize"};
  std::string vocab;
  bool pair = false;
  int64_t max_len = 0;
  app.add_option("--vocab", vocab,
                 "a tokenizer directory (vocab.txt, optional tokenizer_config.json) or a vocab.txt"
                 " (uncased)")
      ->required();
  app.add_flag("--pair", pair, "each line is two texts separated by a tab (the first tab)");
  app.add_option("--max-len", max_len,
                 "truncate to N ids including [CLS]/[SEP], longest text first (0: no limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (leanback tokenize --help lists the options)");
  }
  const auto tok = data::WordPieceTokenizer::from_path(vocab);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    data::Encoding e;
    if (pair) {
      const size_t tab = line.find('\t');
      LB_CHECK(tab != std::string::npos, "stdin:", n, ": --pair needs two texts separated by a tab");
      const std::string b = line.substr(tab + 1);
      e = tok.encode(line.substr(0, tab), &b, max_len);
    } else {
      e = tok.encode(line, nullptr, max_len);
    }
    out << nlohmann::json{{"input_ids", e.input_ids}, {"token_type_ids", e.token_type_ids}}.dump()
        << "\n";
  }
  return 0;
}

int cmd_tokenize(const std::vector<std::string>& args) {
  return cmd_tokenize(args, std::cin, std::cout);
}

}  // namespace lb::cli
