// metrics.jsonl: writer, reader and resume truncation (see metrics_log.h).
#include "lb/train/run/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"
#include "lb/train/run/output_dir.h"
#include "src/train/run/event_file.h"

namespace lb::train {

namespace {
std::atomic<int64_t> files_opened{0};  // this process's event files, for unique names

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
// One scalars.csv row; the value printed to round-trip (17 significant digits at most).
std::string scalar_row(int64_t step, const std::string& tag, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return std::to_string(step) + "," + tag + "," + buf + "\n";
}
}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool enabled) : path_(path) {
  if (!enabled) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  LB_CHECK(fd_ >= 0, "cannot write ", path, ": ", std::strerror(errno));
}

MetricsLog::MetricsLog(const std::string& path, bool enabled, int64_t resumed_step) : MetricsLog(path, enabled) {
  if (!enabled) return;
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(path).parent_path();
  csv_path_ = (dir / "scalars.csv").string();
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const std::string events =
      "events.out.tfevents." + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "." + host + "." +
      std::to_string(::getpid()) + "." + std::to_string(files_opened++);  // as TensorBoard's own writers
  record_written(dir, {"scalars.csv", events});
  // scalars.csv again from the lines metrics.jsonl holds (a resume has cut it back to its step).
  std::string csv = "step,tag,value\n";
  if (fs::exists(path))
    for (const auto& l : read_metrics(path))
      for (const auto& [tag, v] : line_scalars(l)) csv += scalar_row(l.value("step", int64_t{0}), tag, v);
  io::write_text_atomic(csv_path_, csv);
  csv_fd_ = ::open(csv_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  LB_CHECK(csv_fd_ >= 0, "cannot write ", csv_path_, ": ", std::strerror(errno));
  events_ = std::make_unique<EventFile>((dir / events).string());
  if (resumed_step > 0) events_->session_start(resumed_step, wall_seconds());
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
  if (csv_fd_ >= 0) ::close(csv_fd_);
}

std::vector<std::pair<std::string, double>> line_scalars(const nlohmann::json& line) {
  std::vector<std::pair<std::string, double>> out;
  const std::string type = line.value("type", "");
  if (type != "train" && type != "eval") return out;
  for (auto it = line.begin(); it != line.end(); ++it) {
    if (!it.value().is_number() || it.key() == "step") continue;
    std::string key = it.key();
    if (type == "eval" && key.rfind("eval_", 0) == 0) key = key.substr(5);
    out.emplace_back(type + "/" + key, it.value().get<double>());
  }
  return out;
}

void MetricsLog::mirror(const nlohmann::json& line) {
  const auto scalars = line_scalars(line);
  if (scalars.empty()) return;
  const int64_t step = line.value("step", int64_t{0});
  const double now = wall_seconds();
  std::string rows;
  for (const auto& [tag, v] : scalars) {
    rows += scalar_row(step, tag, v);
    events_->scalar(tag, step, v, now);
  }
  io::write_all(csv_fd_, rows.data(), rows.size(), csv_path_);
}

void MetricsLog::write(const nlohmann::json& line) {
  if (fd_ < 0) return;
  if (events_) mirror(line);
  const std::string text = line.dump() + "\n";
  struct stat st {};
  LB_CHECK(::fstat(fd_, &st) == 0, "cannot write ", path_, ": ", std::strerror(errno));
  try {
    io::write_all(fd_, text.data(), text.size(), path_);
  } catch (const Error&) {
    const int err = errno;
    // Cut a partial line back off, so the file stays whole lines.
    const bool cut = ::ftruncate(fd_, st.st_size) == 0;
    LB_FAIL("writing ", path_, " failed: ", std::strerror(err),
            cut ? " (the partial line was removed; the file ends at the previous line)"
                : " (the file may end in a partial line)");
  }
}

std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::ifstream in(path);
  LB_CHECK(in.good(), path, ": cannot read");
  std::vector<nlohmann::json> out;
  int line_no = 0;
  for (std::string l; std::getline(in, l);) {
    ++line_no;
    if (l.empty()) continue;
    try {
      out.push_back(io::parse_json(l, path + ":" + std::to_string(line_no)));
    } catch (const Error&) {
      // A run killed mid-write leaves a torn last line; anything else is damage.
      LB_CHECK(in.peek() == std::char_traits<char>::eof(), path, ":", line_no, ": not valid JSON");
    }
  }
  return out;
}

void truncate_metrics(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  std::ifstream in(path);
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      const auto j = io::parse_json(line, path);
      if (j.value("type", "") != "run" && j.value("step", int64_t{0}) > step) continue;
    } catch (const std::exception&) {
      continue;  // a line torn by a kill
    }
    kept += line + "\n";
  }
  io::write_text_atomic(path, kept);
}

}  // namespace lb::train
