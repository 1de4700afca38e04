// `leanback tokenize`: BERT WordPiece ids of each stdin line as a JSON line (tokenize.cpp).
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace lb::cli {

// leanback tokenize --vocab DIR|FILE [--pair] [--max-len N]: reads lines from stdin (with
// --pair a tab separates the two texts) and prints {"input_ids":[...],"token_type_ids":[...]}
// per line. Bad flags throw UsageError; a --pair line without a tab throws lb::Error naming
// its line number.
int cmd_tokenize(const std::vector<std::string>& args);
// The same on given streams (what cmd_tokenize runs on stdin/stdout).
int cmd_tokenize(const std::vector<std::string>& args, std::istream& in, std::ostream& out);

}  // namespace lb::cli
