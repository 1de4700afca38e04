// Checkpoint save/load (see checkpoint.h).
#include "lb/train/run/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lb/core/random.h"
#include "lb/nn/layers.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/io/safetensors.h"

namespace lb::train {

namespace {
constexpr const char* kModelFile = "model.safetensors";
constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = "trainer_state.json";
// 2: every file carries the save's id (safetensors __metadata__ "save_id", the state's
// "save_id"), and a save is written to a staging directory and swapped in whole.
constexpr int kFormatVersion = 2;

nlohmann::json rng_to_json(const PhiloxStream::State& s) {
  return {{"seed", s.seed}, {"subsequence", s.subsequence}, {"offset", s.offset},
          {"has_cached_normal", s.has_cached_normal}, {"cached_normal", s.cached_normal}};
}

PhiloxStream::State rng_from_json(const nlohmann::json& j, const std::string& path) {
  LB_CHECK(j.is_object() && j.contains("has_cached_normal") && j["has_cached_normal"].is_boolean(), path,
           ": expected {seed, subsequence, offset, has_cached_normal, cached_normal}");
  return {io::json_uint(j, "seed", path), io::json_uint(j, "subsequence", path), io::json_uint(j, "offset", path),
          j["has_cached_normal"].get<bool>(), static_cast<float>(io::json_number(j, "cached_normal", path))};
}

// The backward strategy of every Linear/Conv2d that has one, by dotted layer name.
std::vector<std::pair<std::string, std::shared_ptr<nn::backward::Strategy>>> strategies_of(
    nn::Module& model) {
  std::vector<std::pair<std::string, std::shared_ptr<nn::backward::Strategy>>> out;
  for (auto& [name, m] : model.named_modules()) {
    if (auto s = nn::backward_strategy_of(*m)) out.emplace_back(name, s);
  }
  return out;
}

namespace fs = std::filesystem;

void fsync_dir(const fs::path& d) {
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Staging and retired names of checkpoint `name`: hidden siblings that find_checkpoint and
// retention ignore. A killed save leaves one of them; the next save in the directory clears
// them (and restores a retired checkpoint whose replacement never arrived).
std::string staging_prefix(const std::string& name) { return "." + name + ".saving-"; }
std::string retired_prefix(const std::string& name) { return "." + name + ".old-"; }

// The process that wrote a save id "<ns>-<pid>-<counter>", or 0.
pid_t writer_of(const std::string& id) {
  const size_t last = id.rfind('-');
  if (last == std::string::npos || last == 0) return 0;
  const size_t prev = id.rfind('-', last - 1);
  if (prev == std::string::npos) return 0;
  try {
    return static_cast<pid_t>(std::stol(id.substr(prev + 1, last - prev - 1)));
  } catch (const std::exception&) {
    return 0;
  }
}

// Leftovers of killed saves in `parent`: always those of checkpoint `name` (being saved
// again now), and those of other checkpoints whose writing process is gone — never a save
// another live process is making (the parent may be shared, e.g. /tmp).
void clean_leftovers(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return;
  std::vector<std::pair<fs::path, std::string>> retired;  // path, the checkpoint it was
  std::vector<fs::path> staged;
  const auto stale = [&](const std::string& owner, const std::string& id) {
    if (owner == name) return true;
    const pid_t pid = writer_of(id);
    return pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
  };
  for (const auto& e : fs::directory_iterator(parent, ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || n[0] != '.') continue;
    if (const size_t at = n.rfind(".saving-"); at != std::string::npos && at > 1) {
      if (stale(n.substr(1, at - 1), n.substr(at + 8))) staged.push_back(e.path());
    } else if (const size_t old = n.rfind(".old-"); old != std::string::npos && old > 1) {
      if (stale(n.substr(1, old - 1), n.substr(old + 5))) retired.emplace_back(e.path(), n.substr(1, old - 1));
    }
  }
  for (const auto& s : staged) fs::remove_all(s, ec);
  for (const auto& [r, name] : retired) {
    if (!fs::exists(parent / name, ec)) fs::rename(r, parent / name, ec);  // the swap was cut short
    else fs::remove_all(r, ec);
  }
}

// An id unique to one save: time, process, counter.
std::string new_save_id() {
  static std::atomic<uint64_t> counter{0};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch()).count();
  return std::to_string(ns) + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

std::map<std::string, Tensor> to_map(const io::SafetensorsFile& f) {
  std::map<std::string, Tensor> m;
  for (const auto& [n, t] : f.tensors) m[n] = t;
  return m;
}
}  // namespace

namespace {
template <typename T>
bool all_finite(const Tensor& t) {
  const T* p = t.data<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(static_cast<double>(p[i]))) return false;
  return true;
}
}  // namespace

std::string first_non_finite(const optim::NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    if (!t.defined() || (t.dtype() != DType::F32 && t.dtype() != DType::F64)) continue;
    const Tensor h = t.device().is_cpu() ? t.contiguous() : t.to(Device::cpu()).contiguous();
    if (!(t.dtype() == DType::F32 ? all_finite<float>(h) : all_finite<double>(h))) return name;
  }
  return "";
}

void save_checkpoint(const std::string& dir_in, const nn::Module& model,
                     const optim::Optimizer* optimizer, const optim::LrSchedule* schedule,
                     const nlohmann::json& extra) {
  // Only finite state is ever written: a diverged run's checkpoint would load and "work".
  nn::NamedTensors weights;
  for (auto& [n, t] : model.state_dict()) weights.emplace_back(n, t);
  if (const std::string bad = first_non_finite(weights); !bad.empty())
    throw NonFiniteState("weight " + bad + " holds NaN or inf; no checkpoint is written from non-finite state");
  if (optimizer)
    if (const std::string bad = first_non_finite(optimizer->state_tensors()); !bad.empty())
      throw NonFiniteState("optimizer state " + bad + " holds NaN or inf; no checkpoint is written from non-finite state");
  // All or nothing: the files go to a staging sibling, are fsynced, and the staging directory
  // replaces `dir` in one rename (RENAME_EXCHANGE where the file system has it); the previous
  // checkpoint stays loadable until then. Each file carries the save id, so loading can tell
  // files of different saves apart whatever happened.
  fs::path target = fs::path(dir_in).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  const std::string name = target.filename().string();
  std::error_code ec;
  fs::create_directories(parent, ec);
  LB_CHECK(fs::is_directory(parent), "cannot create checkpoint directory ", parent.string(), ": ", ec.message());
  clean_leftovers(parent, name);
  const std::string save_id = new_save_id();
  const fs::path staging = parent / (staging_prefix(name) + save_id);
  LB_CHECK(fs::create_directory(staging, ec), "cannot create ", staging.string(), ": ", ec.message());
  // A write that fails (a full disk, a file-size limit) leaves nothing behind: the staging
  // directory is this save's own, made just above under its unique id.
  struct RemoveUnlessSwapped {
    const fs::path& path;
    bool filled = false;
    ~RemoveUnlessSwapped() {
      std::error_code e;
      if (!filled) fs::remove_all(path, e);
    }
  } guard{staging};
  const std::string dir = staging.string();
  io::save_safetensors((fs::path(dir) / kModelFile).string(), weights,
                       {{"format", "pt"}, {"producer", "leanback"}, {"save_id", save_id}});
  nlohmann::json state;
  state["format_version"] = kFormatVersion;
  state["save_id"] = save_id;
  if (optimizer) {
    io::save_safetensors((fs::path(dir) / kOptimizerFile).string(), optimizer->state_tensors(),
                         {{"save_id", save_id}});
    state["optimizer"] = optimizer->state_json();
    state["step"] = optimizer->step_count();
  } else {
    state["step"] = 0;
  }
  if (schedule) state["lr_schedule"] = schedule->to_json();
  state["rng"] = rng_to_json(default_generator().state());
  // Learned per-layer strategy state (INSTANT bases, HOT quantiser choices).
  nlohmann::json backward = nlohmann::json::object();
  for (auto& [name, s] : strategies_of(const_cast<nn::Module&>(model)))
  {
    backward[name] = {{"type", s->type()}, {"state", s->state_json()}, {"accounting", s->accounting_state()}};
    if (s->record().fell_back) backward[name]["fallback_reason"] = s->record().fallback_reason;
  }
  state["backward"] = backward;
  state["extra"] = extra;
  io::write_text_atomic((fs::path(dir) / kStateFile).string(), state.dump(2) + "\n");
  fsync_dir(staging);
  guard.filled = true;
  // Swap in. Without an old checkpoint: a plain rename. With one: exchange the two names
  // atomically, then delete what is now the staging name; where RENAME_EXCHANGE is not
  // supported, retire the old one under a hidden name first (a kill between the two renames
  // leaves it there, and the next save restores it).
  if (!fs::exists(target)) {
    fs::rename(staging, target, ec);
    LB_CHECK(!ec, "cannot move ", staging.string(), " to ", target.string(), ": ", ec.message());
  } else if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_dir(parent);
    fs::remove_all(staging, ec);
  } else {
    const fs::path retired = parent / (retired_prefix(name) + save_id);
    fs::rename(target, retired, ec);
    LB_CHECK(!ec, "cannot move the previous checkpoint ", target.string(), " aside: ", ec.message());
    fs::rename(staging, target, ec);
    LB_CHECK(!ec, "cannot move ", staging.string(), " to ", target.string(), ": ", ec.message());
    fsync_dir(parent);
    fs::remove_all(retired, ec);
  }
  fsync_dir(parent);
}

LoadedCheckpoint load_checkpoint(const std::string& dir, nn::Module& model,
                                 optim::Optimizer* optimizer) {
  namespace fs = std::filesystem;
  const std::string state_path = (fs::path(dir) / kStateFile).string();
  LB_CHECK(fs::is_directory(dir), "checkpoint directory ", dir, " does not exist");
  LB_CHECK(fs::exists(state_path), "checkpoint ", dir, " has no ", kStateFile,
           " (an interrupted save, or not a leanback checkpoint)");
  LoadedCheckpoint out;
  out.state = io::read_json_file(state_path);
  LB_CHECK(out.state.is_object(), state_path, ": expected a JSON object");
  const nlohmann::json& version = out.state.contains("format_version") ? out.state["format_version"] : nlohmann::json();
  LB_CHECK(version.is_number_integer() && (version == 1 || version == kFormatVersion), state_path,
           ": unsupported format_version ", version.dump(), " (expected 1 or ", kFormatVersion, ")");
  const std::string model_path = (fs::path(dir) / kModelFile).string();
  const io::SafetensorsFile weights = io::load_safetensors(model_path);
  // Version 2: the files must come from one save.
  std::string save_id;
  if (version == kFormatVersion) {
    LB_CHECK(out.state.contains("save_id") && out.state["save_id"].is_string(), state_path, ": no save_id");
    save_id = out.state["save_id"].get<std::string>();
    const auto it = weights.metadata.find("save_id");
    LB_CHECK(it != weights.metadata.end() && it->second == save_id, model_path, " belongs to another save (",
             it == weights.metadata.end() ? std::string("no save_id") : "save " + it->second, ") than ", state_path,
             " (save ", save_id, "); the checkpoint is torn: resume from another one");
  }
  if (const std::string bad = first_non_finite(weights.tensors); !bad.empty())
    throw NonFiniteState(model_path + ": tensor " + bad + " holds NaN or inf: this checkpoint comes from a " +
                         "diverged run (older leanback saved such state); use an earlier checkpoint");
  try {
    out.report = model.load_state_dict(to_map(weights), /*strict=*/true);
  } catch (const Error& e) {
    LB_FAIL(model_path, ": ", e.what());
  }
  try {
    out.step = io::json_int(out.state, "step", 0, INT64_MAX, state_path);
    if (optimizer) {
      LB_CHECK(out.state.contains("optimizer"), state_path, ": no optimizer state in this checkpoint");
      const std::string opt_path = (fs::path(dir) / kOptimizerFile).string();
      const io::SafetensorsFile opt = io::load_safetensors(opt_path);
      if (!save_id.empty()) {
        const auto it = opt.metadata.find("save_id");
        LB_CHECK(it != opt.metadata.end() && it->second == save_id, opt_path, " belongs to another save than ",
                 state_path, " (save ", save_id, "); the checkpoint is torn: resume from another one");
      }
      if (const std::string bad = first_non_finite(opt.tensors); !bad.empty())
        throw NonFiniteState(opt_path + ": tensor " + bad + " holds NaN or inf: this checkpoint comes from a " +
                             "diverged run; use an earlier checkpoint");
      optimizer->load_state(out.state.at("optimizer"), to_map(opt));
    }
    LB_CHECK(out.state.contains("rng"), state_path, ": no rng");
    default_generator().set_state(rng_from_json(out.state.at("rng"), state_path + ": rng"));
    // Strategy state is restored where the layer runs the same strategy type as when saved;
    // a run resumed with another strategy (e.g. --strategy vanilla) starts that one fresh.
    const nlohmann::json backward = out.state.value("backward", nlohmann::json::object());
    for (auto& [name, s] : strategies_of(model)) {
      if (!backward.contains(name)) continue;
      const auto& entry = backward.at(name);
      if (entry.at("type").get<std::string>() != s->type()) {
        out.notes.push_back("layer " + name + ": checkpoint has " +
                            entry.at("type").get<std::string>() + " state, layer now runs " +
                            s->type() + "; starting it fresh");
        continue;
      }
      s->load_state_json(entry.at("state"));
      if (entry.contains("accounting")) s->load_accounting_state(entry.at("accounting"));  // before it: none
      if (entry.contains("fallback_reason")) s->record().fall_back_to_exact(entry.at("fallback_reason").get<std::string>());
    }
  } catch (const nlohmann::json::exception& e) {
    LB_FAIL(state_path, ": malformed entry: ", e.what());
  }
  return out;
}

}  // namespace lb::train
