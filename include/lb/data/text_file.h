// A user's own text data: CSV, TSV or JSON Lines files whose columns the config names (one
// or two text columns, an optional label column), read as Hugging Face `datasets` reads
// them for run_glue.py's --train_file (pandas' CSV dialect, one JSON object per line).
//
//   CSV / TSV  a header row names the columns; fields are separated by ',' or '\t' and may
//              be quoted with '"' (a quoted field may hold the separator, line breaks and ""
//              for a quote); blank lines are skipped; every row has the header's field count.
//   JSON Lines one object per non-blank line; text columns are strings, the label a string,
//              number or boolean; other keys are ignored.
//
// UTF-8 (a BOM is dropped), LF or CRLF. Every bad row is an lb::Error naming file:line and
// what is wrong (a missing column lists the file's columns; an unterminated quote names the
// line it opened on).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace lb::data {

enum class TextFormat { Csv, Tsv, JsonLines };

// "csv", "tsv", "jsonl": the names data.format takes and the files' extensions.
const std::vector<std::string>& text_format_names();
TextFormat text_format_from_name(const std::string& name);  // unknown: an error listing them
std::string text_format_name(TextFormat f);
// The format a file's extension names (.csv, .tsv, .jsonl; case-insensitive), or an error
// naming the file and the extensions known.
TextFormat text_format_of_file(const std::string& path);

struct TextColumns {
  std::vector<std::string> text;  // one column (single texts) or two (pairs)
  std::string label;              // "" = no label column is read
};

struct TextRow {
  int64_t line = 0;                // 1-based line the row starts on
  std::vector<std::string> texts;  // in TextColumns::text's order
  std::string label;               // as written (JSON numbers in their shortest form); "" = none
};

struct TextFile {
  std::string path;
  std::vector<TextRow> rows;
  bool labeled = false;  // the file has the label column (then every row has a label)
};

// Reads `path` in format `f`. The text columns must exist; the label column is read where
// the file has it, and must exist when label_required. A labeled file's rows all have a
// non-empty label. An empty file, or one with a header and no rows, is an error.
TextFile read_text_file(const std::string& path, TextFormat f, const TextColumns& columns,
                        bool label_required);

// Plain text, one example per non-blank line (pairs: the two sentences separated by the
// line's first tab, which a pair's line must have); unlabeled.
TextFile read_text_lines(const std::string& path, bool pairs);

// Class names in label-id order as Hugging Face's run_glue.py makes them from a training
// file: the distinct labels sorted (numerically where every label is a number, so "2" < "10").
std::vector<std::string> sorted_label_names(const TextFile& file);

}  // namespace lb::data
