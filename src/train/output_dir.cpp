// Output directories and what leanback may delete in them (see output_dir.h).
#include "lb/train/output_dir.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

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
std::vector<std::string> remove_files_then_dir(const fs::path& dir, const std::vector<std::string>& files,
                                               bool (*extra)(const std::string&) = nullptr) {
  std::vector<std::string> kept;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool ours = std::find(files.begin(), files.end(), n) != files.end() || is_atomic_leftover_of(n, files) ||
                      (extra != nullptr && extra(n));
    if (ours && is_link_or_file(e.path())) remove_entry(e.path());
    else kept.push_back((dir.filename() / n).string());
  }
  if (ec) throw Error("cannot list " + dir.string() + ": " + ec.message());
  if (kept.empty()) remove_entry(dir);
  return kept;
}

bool is_plot_file(const std::string& n) { return n.size() > 4 && n.compare(n.size() - 4, 4, ".png") == 0; }
bool is_tsv_file(const std::string& n) { return n.size() > 4 && n.compare(n.size() - 4, 4, ".tsv") == 0; }

const std::vector<std::string>& checkpoint_files() {
  static const std::vector<std::string> f{"model.safetensors", "optimizer.safetensors", "trainer_state.json"};
  return f;
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
  const fs::path m = dir / kOutputMarker;
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(m, ec))) return std::nullopt;
  try {
    const nlohmann::json j = io::read_json_file(m.string());
    const std::string k = j.is_object() && j.contains("kind") && j["kind"].is_string() ? j["kind"].get<std::string>() : "";
    for (OutputKind kind : {OutputKind::Run, OutputKind::Compare, OutputKind::Predict, OutputKind::Export})
      if (k == output_kind_name(kind)) return kind;
  } catch (const Error&) {
  }
  return std::nullopt;
}

void write_output_marker(const fs::path& dir, OutputKind kind) {
  const nlohmann::json j = {{"written_by", "leanback"},
                            {"kind", output_kind_name(kind)},
                            {"note", "leanback deletes or replaces files only in directories holding this marker, "
                                     "and only the files it writes there"}};
  io::write_text_atomic((dir / kOutputMarker).string(), j.dump(2) + "\n");
}

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
  if (!output_marker(dir)) write_output_marker(dir, kind);
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
  const auto kept = remove_files_then_dir(dir, checkpoint_files());
  if (kept.empty()) return "";
  std::string s = dir.string() + " kept: it also holds";
  for (const auto& k : kept) s += " " + k;
  return s;
}

std::vector<std::string> remove_owned_entries(const fs::path& dir, OutputKind kind) {
  LB_CHECK(output_marker(dir) == kind, dir.string(), " holds no leanback ", output_kind_name(kind),
           " marker; nothing is deleted there");
  static const std::vector<std::string> run_files{"config.json", "plan.txt", "memory_plan.json", "metrics.jsonl",
                                                  "eval_results.json", "compare_failed.txt"};
  static const std::vector<std::string> compare_files{"compare.json", "report.json", "report.md"};
  static const std::vector<std::string> export_files{
      "config.json",           "model.safetensors",       "adapter_config.json",     "adapter_model.safetensors",
      "vocab.txt",             "tokenizer_config.json",   "special_tokens_map.json", "preprocessor_config.json"};
  static const std::vector<std::string> no_files;
  const std::vector<std::string>& files = kind == OutputKind::Run       ? run_files
                                          : kind == OutputKind::Compare ? compare_files
                                          : kind == OutputKind::Export  ? export_files
                                                                        : no_files;
  std::vector<std::string> kept;
  const auto keep = [&](const std::vector<std::string>& k) { kept.insert(kept.end(), k.begin(), k.end()); };
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    const std::string n = p.filename().string();
    if (n == kOutputMarker) continue;  // kept: the directory stays provably ours
    if (std::find(files.begin(), files.end(), n) != files.end() || is_atomic_leftover_of(n, files)) {
      if (is_link_or_file(p)) remove_entry(p);
      else kept.push_back(n);
    } else if (kind == OutputKind::Run && (is_checkpoint_name(n) || is_checkpoint_leftover(n))) {
      if (const std::string k = remove_checkpoint_dir(p); !k.empty()) kept.push_back(n + "/");
    } else if (kind == OutputKind::Run && n == "export" && is_real_dir(p) &&
               output_marker(p) == OutputKind::Export) {  // output.export's directory
      const auto k = remove_owned_entries(p, OutputKind::Export);
      if (k.empty()) {
        remove_entry(p / kOutputMarker);
        remove_entry(p);
      }
      for (const auto& x : k) kept.push_back(n + "/" + x);
    } else if (n == "plots" && is_real_dir(p)) {
      keep(remove_files_then_dir(p, {}, is_plot_file));
    } else if (kind == OutputKind::Predict && is_tsv_file(n) && is_link_or_file(p)) {
      remove_entry(p);
    } else if (kind == OutputKind::Compare && is_real_dir(p)) {
      // <strategy>/seed-<N>/: each a run directory with its own marker.
      std::vector<std::string> sub_kept;
      for (const auto& r : fs::directory_iterator(p)) {
        if (is_real_dir(r.path()) && output_marker(r.path()) == OutputKind::Run) {
          const auto k = remove_owned_entries(r.path(), OutputKind::Run);
          if (k.empty()) {
            remove_entry(r.path() / kOutputMarker);
            remove_entry(r.path());
          }
          for (const auto& x : k) sub_kept.push_back(n + "/" + r.path().filename().string() + "/" + x);
        } else {
          sub_kept.push_back(n + "/" + r.path().filename().string());
        }
      }
      if (sub_kept.empty()) remove_entry(p);
      keep(sub_kept);
    } else {
      kept.push_back(n);
    }
  }
  return kept;
}

}  // namespace lb::train
