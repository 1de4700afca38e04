// Output directories and what leanback may delete in them (see output_dir.h).
#include "lb/train/run/output_dir.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"

namespace lb::train {

namespace fs = std::filesystem;

const char* output_kind_name(OutputKind kind) {
  switch (kind) {
    case OutputKind::Run: return "run";
    case OutputKind::Compare: return "compare";
    case OutputKind::Predict: return "predict";
    case OutputKind::Export: return "export";
  }
  return "?";
}

namespace {

// The absolute path with every existing component's links resolved (where the system cannot
// resolve it, e.g. a name too long, the lexical absolute path: creating it fails later with
// the system's reason).
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec).lexically_normal();
  const fs::path r = fs::weakly_canonical(abs, ec);
  return ec ? abs : r.lexically_normal();
}

fs::path home_dir() {
  if (const char* h = std::getenv("HOME"); h != nullptr && *h) return h;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) return pw->pw_dir;
  return {};
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool is_checkpoint_name(const std::string& n) {
  if (!starts_with(n, "checkpoint-") || n.size() == 11) return false;
  return std::all_of(n.begin() + 11, n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// ".checkpoint-<N>.saving-<id>" / ".checkpoint-<N>.old-<id>": a killed save's leftovers.
bool is_checkpoint_leftover(const std::string& n) {
  if (n.size() < 2 || n[0] != '.') return false;
  for (const char* tag : {".saving-", ".old-"}) {
    const size_t at = n.find(tag, 1);
    if (at != std::string::npos && is_checkpoint_name(n.substr(1, at - 1))) return true;
  }
  return false;
}

// ".<name>.tmp.<pid>.<n>": a temporary file io::write_atomic left when killed.
bool is_atomic_leftover_of(const std::string& n, const std::vector<std::string>& names) {
  for (const auto& f : names)
    if (starts_with(n, "." + f + ".tmp.")) return true;
  return false;
}

bool is_link_or_file(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  return !ec && (fs::is_symlink(st) || fs::is_regular_file(st));
}

bool is_real_dir(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  return !ec && fs::is_directory(st) && !fs::is_symlink(st);
}

// Removes a file or a link (never what a link points to).
void remove_entry(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
  if (ec) throw Error("cannot delete " + p.string() + ": " + ec.message());
}

// Deletes the listed files of `dir` (and their write_atomic leftovers), then `dir` itself if
// nothing else is left; returns what was kept, as "dir/name" entries.
std::vector<std::string> remove_files_then_dir(const fs::path& dir, const std::vector<std::string>& files) {
  std::vector<std::string> kept;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool ours = std::find(files.begin(), files.end(), n) != files.end() || is_atomic_leftover_of(n, files);
    if (ours && is_link_or_file(e.path())) remove_entry(e.path());
    else kept.push_back((dir.filename() / n).string());
  }
  if (ec) throw Error("cannot list " + dir.string() + ": " + ec.message());
  if (kept.empty()) remove_entry(dir);
  return kept;
}


const std::vector<std::string>& checkpoint_files() {
  static const std::vector<std::string> f{"model.safetensors", "optimizer.safetensors", "trainer_state.json"};
  return f;
}

std::optional<nlohmann::json> read_marker(const fs::path& dir) {
  const fs::path m = dir / kOutputMarker;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(m, ec))) return std::nullopt;
  try {
    nlohmann::json j = io::read_json_file(m.string());
    if (j.is_object()) return j;
  } catch (const Error&) {
  }
  return std::nullopt;
}

void write_marker(const fs::path& dir, OutputKind kind, const std::set<std::string>& written) {
  const nlohmann::json j = {{"written_by", "leanback"},
                            {"kind", output_kind_name(kind)},
                            {"note", "leanback deletes or replaces files only in directories holding this marker, "
                                     "and only the files it records here as written"},
                            {"written", written}};
  io::write_text_atomic((dir / kOutputMarker).string(), j.dump(2) + "\n");
}

bool marker_records_names(const fs::path& dir) {
  const auto j = read_marker(dir);
  return j && j->contains("written") && (*j)["written"].is_array();
}

// A marker from before markers recorded names: what that leanback wrote there by its fixed
// names (checkpoint-<N> directories, a run's export/, a comparison's <strategy>/seed-<N>
// runs), never by a pattern such as *.png.
std::set<std::string> legacy_names(const fs::path& dir, OutputKind kind) {
  static const std::vector<std::string> run_files{"config.json", "plan.txt", "memory_plan.json", "metrics.jsonl",
                                                  "eval_results.json", "compare_failed.txt", "export"};
  static const std::vector<std::string> compare_files{"compare.json", "report.json", "report.md"};
  static const std::vector<std::string> export_files{
      "config.json",           "model.safetensors",       "adapter_config.json",     "adapter_model.safetensors",
      "vocab.txt",             "tokenizer_config.json",   "special_tokens_map.json", "preprocessor_config.json"};
  std::set<std::string> names;
  const auto add = [&](const std::vector<std::string>& v) { names.insert(v.begin(), v.end()); };
  std::error_code ec;
  switch (kind) {
    case OutputKind::Run:
      add(run_files);
      for (const auto& e : fs::directory_iterator(dir, ec))
        if (const std::string n = e.path().filename().string(); is_checkpoint_name(n) && !output_marker(e.path()))
          names.insert(n);
      break;
    case OutputKind::Compare:
      add(compare_files);
      for (const auto& s : fs::directory_iterator(dir, ec))
        if (is_real_dir(s.path()))
          for (const auto& r : fs::directory_iterator(s.path(), ec))
            if (output_marker(r.path()) == OutputKind::Run)
              names.insert(s.path().filename().string() + "/" + r.path().filename().string());
      break;
    case OutputKind::Export: add(export_files); break;
    case OutputKind::Predict: break;
  }
  return names;
}

// The names the marker of `dir` (of `kind`) records as written by leanback.
std::set<std::string> written_names(const fs::path& dir, OutputKind kind) {
  const auto j = read_marker(dir);
  if (!j || !j->contains("written") || !(*j)["written"].is_array()) return legacy_names(dir, kind);
  std::set<std::string> names;
  for (const auto& n : (*j)["written"])
    if (n.is_string()) names.insert(n.get<std::string>());
  return names;
}

// A marked directory inside another that leanback clears with its own record: a run's
// export/ (output.export), a comparison's <strategy>/seed-<N> runs. `rel`: its path in the
// parent. Any other (an export someone placed at RUN/checkpoint-99) is kept whole.
bool is_nested_output(OutputKind parent, OutputKind child, const std::string& rel) {
  return (parent == OutputKind::Run && child == OutputKind::Export && rel == "export") ||
         (parent == OutputKind::Compare && child == OutputKind::Run && std::count(rel.begin(), rel.end(), '/') == 1);
}

// Deletes, in `root`/`sub` ("" for root itself), the entries the record `written` names
// (paths relative to root) and their leftovers; appends what is kept to `kept`.
void clear_recorded(const fs::path& root, const std::string& sub, OutputKind kind, const std::set<std::string>& written,
                    std::vector<std::string>& kept) {
  const fs::path dir = sub.empty() ? root : root / sub;
  const std::string prefix = sub.empty() ? "" : sub + "/";
  std::vector<std::string> here;  // recorded names directly in this directory
  for (const auto& w : written)
    if (w.rfind(prefix, 0) == 0 && w.find('/', prefix.size()) == std::string::npos) here.push_back(w.substr(prefix.size()));
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string n = p.filename().string(), rel = prefix + n;
    if (sub.empty() && n == kOutputMarker) continue;  // kept: the directory stays provably ours
    const bool recorded = written.count(rel) > 0;
    if (is_link_or_file(p)) {
      if (recorded || is_atomic_leftover_of(n, here)) remove_entry(p);
      else kept.push_back(rel);
      continue;
    }
    if (!is_real_dir(p)) {
      kept.push_back(rel);
      continue;
    }
    if (const auto marker = output_marker(p)) {  // another output directory: cleared by its own record
      if (!recorded || !is_nested_output(kind, *marker, rel)) {
        kept.push_back(rel + "/");
        continue;
      }
      const auto k = remove_owned_entries(p, *marker);
      if (k.empty()) {
        remove_entry(p / kOutputMarker);
        remove_entry(p);
      }
      for (const auto& x : k) kept.push_back(rel + "/" + x);
      continue;
    }
    const bool checkpoint = kind == OutputKind::Run && sub.empty() &&
                            ((recorded && is_checkpoint_name(n)) ||
                             (is_checkpoint_leftover(n) && written.count(n.substr(1, n.find('.', 1) - 1)) > 0));
    if (checkpoint) {
      if (!remove_checkpoint_dir(p).empty()) kept.push_back(rel + "/");
      continue;
    }
    const bool holds_recorded = std::any_of(written.begin(), written.end(),
                                            [&](const std::string& w) { return w.rfind(rel + "/", 0) == 0; });
    if (!holds_recorded) {
      kept.push_back(rel);
      continue;
    }
    const size_t before = kept.size();
    clear_recorded(root, rel, kind, written, kept);
    if (kept.size() == before) remove_entry(p);
  }
}

}  // namespace

void refuse_protected_dir(const fs::path& dir, const std::string& flag) {
  const fs::path target = resolved(dir);
  const auto refuse = [&](const std::string& what) {
    throw OutputRefused(flag + " " + dir.string() + ": " + what +
                        " cannot be an output directory (leanback would write and may delete there); pass a "
                        "directory of its own, e.g. " + flag + " runs/NAME");
  };
  if (target == target.root_path()) refuse("the root directory");
  if (const fs::path home = home_dir(); !home.empty() && resolved(home) == target) refuse("the home directory");
  std::error_code ec;
  const fs::path cwd = resolved(fs::current_path(ec));
  if (!ec && !cwd.empty()) {
    if (cwd == target) refuse("the current directory");
    for (fs::path p = cwd; p.has_relative_path(); p = p.parent_path())
      if (p.parent_path() == target) refuse("an ancestor of the current directory");
  }
}

std::optional<OutputKind> output_marker(const fs::path& dir) {
  const auto j = read_marker(dir);
  const std::string k = j && j->contains("kind") && (*j)["kind"].is_string() ? (*j)["kind"].get<std::string>() : "";
  for (OutputKind kind : {OutputKind::Run, OutputKind::Compare, OutputKind::Predict, OutputKind::Export})
    if (k == output_kind_name(kind)) return kind;
  return std::nullopt;
}

void write_output_marker(const fs::path& dir, OutputKind kind) { write_marker(dir, kind, {}); }

bool output_dir_fresh(const fs::path& dir, const std::string& flag) {
  std::error_code ec;
  const auto st = fs::status(dir, ec);
  if (!fs::exists(st)) return true;
  if (!fs::is_directory(st)) throw OutputRefused(flag + " " + dir.string() + ": exists and is not a directory");
  const bool empty = fs::is_empty(dir, ec);
  if (ec) throw OutputRefused(flag + " " + dir.string() + ": cannot be read (" + ec.message() + ")");
  return empty;
}

bool run_dir_verdict(const fs::path& dir, const fs::path& resume_ckpt, bool overwrite) {
  refuse_protected_dir(dir, "--out");
  if (output_dir_fresh(dir, "--out")) return false;
  const auto marker = output_marker(dir);
  const std::string d = dir.string();
  if (!resume_ckpt.empty()) {
    // Resuming in the run's own directory (the one holding the checkpoint; made before markers
    // existed or not). Any other directory is judged as for a new run: the resumed run
    // writes config.json, metrics.jsonl and checkpoints there.
    const fs::path ck = resolved(resume_ckpt), rd = resolved(dir);
    if (ck == rd || ck.parent_path() == rd) return false;
  }
  if (marker == OutputKind::Run) {
    if (overwrite) return true;
    throw OutputRefused("run directory " + d + " already exists and is not empty; pass --overwrite to replace it, " +
                        "--out DIR for another one, or --resume " + d + " to continue it");
  }
  const std::string why =
      marker ? " holds a leanback " + std::string(output_kind_name(*marker)) + " directory, not a run"
             : " is not empty and was not created by leanback (no " + std::string(kOutputMarker) +
                   " marker; run directories from before markers existed have none either)";
  if (overwrite)
    throw OutputRefused("--overwrite refused: " + d + why +
                        ". leanback replaces only run directories it created and deletes only files it wrote; " +
                        "pass --out DIR for a new directory, or empty this one yourself");
  throw OutputRefused("run directory " + d + why + "; pass --out DIR for a new directory");
}

void create_output_dir(const fs::path& dir, OutputKind kind, const std::string& flag) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec))
    throw OutputRefused(flag + " " + dir.string() + ": cannot create the directory (" +
                        (ec ? ec.message() : std::string("a file is in the way")) + ")");
  // A directory from before markers existed (resumed, or a comparison reused) gets one that
  // records what that leanback wrote there by its fixed names.
  if (!output_marker(dir)) write_marker(dir, kind, fs::is_empty(dir, ec) ? std::set<std::string>{} : legacy_names(dir, kind));
}

std::string remove_checkpoint_dir(const fs::path& dir) {
  // Only inside a marked run directory, and only a checkpoint's name: never a path as typed.
  const fs::path parent = dir.has_parent_path() ? dir.parent_path() : fs::path(".");
  const std::string name = dir.filename().string();
  if (output_marker(parent) != OutputKind::Run || !(is_checkpoint_name(name) || is_checkpoint_leftover(name)))
    return dir.string() + " kept: not a checkpoint of a leanback run directory";
  std::error_code ec;
  const auto st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return "";
  if (fs::is_symlink(st)) {
    remove_entry(dir);
    return "";
  }
  if (!fs::is_directory(st)) return dir.string() + " is not a directory";
  if (const auto marker = output_marker(dir))
    return dir.string() + " kept: it holds a leanback " + output_kind_name(*marker) + " directory, not a checkpoint";
  const auto kept = remove_files_then_dir(dir, checkpoint_files());
  if (kept.empty()) return "";
  std::string s = dir.string() + " kept: it also holds";
  for (const auto& k : kept) s += " " + k;
  return s;
}

std::vector<std::string> remove_owned_entries(const fs::path& dir, OutputKind kind) {
  LB_CHECK(output_marker(dir) == kind, dir.string(), " holds no leanback ", output_kind_name(kind),
           " marker; nothing is deleted there");
  std::vector<std::string> kept;
  clear_recorded(dir, "", kind, written_names(dir, kind), kept);
  return kept;
}

std::string kept_entries_note(const fs::path& dir, const std::vector<std::string>& kept) {
  std::string s = "--overwrite: kept " + std::to_string(kept.size()) + (kept.size() == 1 ? " entry" : " entries") +
                  " of " + dir.string() + " that leanback did not write:";
  for (const auto& k : kept) s += " " + k;
  return s;
}

void record_written(const fs::path& dir, const std::vector<std::string>& names) {
  const auto kind = output_marker(dir);
  if (!kind) return;  // not ours: nothing will be deleted there, so nothing to record
  std::set<std::string> all = written_names(dir, *kind);
  const size_t before = all.size();
  all.insert(names.begin(), names.end());
  if (all.size() != before || !marker_records_names(dir)) write_marker(dir, *kind, all);
}

void forget_written(const fs::path& dir, const std::vector<std::string>& names) {
  const auto kind = output_marker(dir);
  if (!kind) return;
  std::set<std::string> all = written_names(dir, *kind);
  size_t erased = 0;
  for (const auto& n : names) erased += all.erase(n);
  if (erased > 0) write_marker(dir, *kind, all);
}

bool was_written(const fs::path& dir, const std::string& name) {
  const auto kind = output_marker(dir);
  return kind && written_names(dir, *kind).count(name) > 0;
}

}  // namespace lb::train
