// CSV / TSV / JSON Lines reader for a user's own text data (see text_file.h).
#include "lb/data/text_file.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "lb/core/error.h"
#include "lb/io/printable.h"
#include "line_reader.h"

namespace lb::data {

namespace {

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + io::printable(v[i]);
  return out;
}

// One CSV/TSV record: its fields, reading further lines while a quoted field is open (a quoted
// line break is part of the field). Blank lines between records are skipped. As pandas does,
// a quote opens a quoted field only at the field's start, and what follows a closing quote up
// to the separator is kept. False at the end of the file.
bool next_record(LineReader& in, char sep, std::vector<std::string>& fields, int64_t& first_line) {
  std::string line;
  do {
    if (!in.next(line)) return false;
  } while (line.empty());
  first_line = in.line_no();
  fields.assign(1, std::string());
  bool quoted = false, at_field_start = true;
  for (size_t i = 0;; ++i) {
    if (i == line.size()) {
      if (!quoted) return true;
      LB_CHECK(in.next(line), in.path(), ":", first_line, ": a quoted field opened on this line is never closed");
      fields.back() += '\n';
      i = static_cast<size_t>(-1);
      continue;
    }
    const char ch = line[i];
    if (quoted) {
      if (ch != '"') fields.back() += ch;
      else if (i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
      else quoted = false;
    } else if (ch == sep) {
      fields.emplace_back();
      at_field_start = true;
      continue;
    } else if (ch == '"' && at_field_start) {
      quoted = true;
    } else {
      fields.back() += ch;
    }
    at_field_start = false;
  }
}

int column_of(const std::vector<std::string>& header, const std::string& name, bool required,
              const std::string& path, const char* role) {
  const auto it = std::find(header.begin(), header.end(), name);
  if (it == header.end()) {
    LB_CHECK(!required, path, ":1: no ", role, " column '", io::printable(name), "' in the header (columns: ",
             join(header), "); name the columns with data.text_columns and data.label_column");
    return -1;
  }
  LB_CHECK(std::find(it + 1, header.end(), name) == header.end(), path, ":1: column '", io::printable(name),
           "' appears twice in the header");
  return static_cast<int>(it - header.begin());
}

void read_delimited(LineReader& in, char sep, const TextColumns& cols, bool label_required, TextFile& out) {
  std::vector<std::string> header, f;
  int64_t line = 0;
  LB_CHECK(next_record(in, sep, header, line), out.path, ": empty file; expected a header row naming the columns");
  std::vector<int> text_at;
  for (const auto& c : cols.text) text_at.push_back(column_of(header, c, true, out.path, "text"));
  const int label_at = cols.label.empty() ? -1 : column_of(header, cols.label, label_required, out.path, "label");
  out.labeled = label_at >= 0;
  while (next_record(in, sep, f, line)) {
    LB_CHECK(f.size() == header.size(), out.path, ":", line, ": ", f.size(), " fields, expected ", header.size(),
             " as the header (", sep == '\t' ? "tab" : "comma", "-separated; quote a field that holds the separator)");
    TextRow r;
    r.line = line;
    for (int k : text_at) r.texts.push_back(f[static_cast<size_t>(k)]);
    if (label_at >= 0) {
      r.label = f[static_cast<size_t>(label_at)];
      LB_CHECK(!r.label.empty(), out.path, ":", line, ": empty label in column '", io::printable(cols.label), "'");
    }
    out.rows.push_back(std::move(r));
  }
}

std::string json_type(const nlohmann::json& v) { return v.is_null() ? "null" : v.type_name(); }

void read_json_lines(LineReader& in, const TextColumns& cols, bool label_required, TextFile& out) {
  std::string text;
  bool first = true;
  while (in.next(text)) {
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = out.path + ":" + std::to_string(in.line_no());
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      LB_FAIL(where, ": not a JSON object (JSON Lines: one object per line): ", e.what());
    }
    LB_CHECK(j.is_object(), where, ": a JSON ", json_type(j), ", expected one object per line");
    auto keys = [&] {
      std::vector<std::string> k;
      for (const auto& it : j.items()) k.push_back(it.key());
      return join(k);
    };
    if (first) {
      out.labeled = !cols.label.empty() && j.contains(cols.label);
      LB_CHECK(out.labeled || !label_required, where, ": no label key '", io::printable(cols.label), "' (keys: ", keys(),
               "); name it with data.label_column");
      first = false;
    }
    TextRow r;
    r.line = in.line_no();
    for (const auto& c : cols.text) {
      LB_CHECK(j.contains(c), where, ": no text key '", io::printable(c), "' (keys: ", keys(),
               "); name the text keys with data.text_columns");
      LB_CHECK(j[c].is_string(), where, ": '", io::printable(c), "' is a JSON ", json_type(j[c]), ", expected a string");
      r.texts.push_back(j[c].get<std::string>());
    }
    if (out.labeled) {
      LB_CHECK(j.contains(cols.label), where, ": no label key '", io::printable(cols.label),
               "' where the file's first row has one (keys: ", keys(), ")");
      const nlohmann::json& v = j[cols.label];
      if (v.is_string()) r.label = v.get<std::string>();
      else if (v.is_boolean()) r.label = v.get<bool>() ? "true" : "false";
      else if (v.is_number()) r.label = v.dump();
      else LB_FAIL(where, ": label '", io::printable(cols.label), "' is a JSON ", json_type(v), ", expected a string, number or boolean");
      LB_CHECK(!r.label.empty(), where, ": empty label '", io::printable(cols.label), "'");
    }
    out.rows.push_back(std::move(r));
  }
  LB_CHECK(!first, out.path, ": empty file; expected JSON Lines (one object per line)");
}

bool as_number(const std::string& s, double& v) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && std::isfinite(v);
}

}  // namespace

const std::vector<std::string>& text_format_names() {
  static const std::vector<std::string> names{"csv", "tsv", "jsonl"};
  return names;
}

TextFormat text_format_from_name(const std::string& name) {
  if (name == "csv") return TextFormat::Csv;
  if (name == "tsv") return TextFormat::Tsv;
  if (name == "jsonl") return TextFormat::JsonLines;
  LB_FAIL("unknown text format '", io::printable(name), "'; valid: csv, tsv, jsonl");
}

std::string text_format_name(TextFormat f) {
  return text_format_names()[static_cast<size_t>(f)];
}

TextFormat text_format_of_file(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (ext == ".csv") return TextFormat::Csv;
  if (ext == ".tsv") return TextFormat::Tsv;
  if (ext == ".jsonl") return TextFormat::JsonLines;
  LB_FAIL(path, ": cannot tell the format from the extension '", io::printable(ext), "' (known: .csv, .tsv, .jsonl)");
}

TextFile read_text_file(const std::string& path, TextFormat f, const TextColumns& columns, bool label_required) {
  LB_CHECK(columns.text.size() == 1 || columns.text.size() == 2, "read_text_file: one or two text columns, got ",
           columns.text.size());
  TextFile out;
  out.path = path;
  LineReader in = LineReader::open(path);
  if (f == TextFormat::JsonLines) read_json_lines(in, columns, label_required, out);
  else read_delimited(in, f == TextFormat::Csv ? ',' : '\t', columns, label_required, out);
  LB_CHECK(!out.rows.empty(), path, ": no data rows");
  return out;
}

TextFile read_text_lines(const std::string& path, bool pairs) {
  TextFile out;
  out.path = path;
  LineReader in = LineReader::open(path);
  std::string line;
  while (in.next(line)) {
    if (line.empty()) continue;
    TextRow r;
    r.line = in.line_no();
    const size_t tab = line.find('\t');
    if (pairs) {
      LB_CHECK(tab != std::string::npos, path, ":", r.line, ": no tab: a sentence pair is two texts separated by a tab");
      r.texts = {line.substr(0, tab), line.substr(tab + 1)};
    } else {
      r.texts = {line};
    }
    out.rows.push_back(std::move(r));
  }
  LB_CHECK(!out.rows.empty(), path, ": no texts (one per line)");
  return out;
}

std::vector<std::string> sorted_label_names(const TextFile& file) {
  const std::set<std::string> distinct = [&] {
    std::set<std::string> s;
    for (const auto& r : file.rows) s.insert(r.label);
    return s;
  }();
  std::vector<std::string> names(distinct.begin(), distinct.end());
  double a = 0, b = 0;
  const bool numeric = std::all_of(names.begin(), names.end(), [&](const std::string& s) { return as_number(s, a); });
  if (numeric)
    std::stable_sort(names.begin(), names.end(), [&](const std::string& x, const std::string& y) {
      as_number(x, a);
      as_number(y, b);
      return a < b;
    });
  return names;
}

}  // namespace lb::data
