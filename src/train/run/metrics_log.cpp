// metrics.jsonl: writer, reader and resume truncation (see metrics_log.h).
#include "lb/train/run/metrics_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "lb/core/error.h"
#include "lb/io/atomic_file.h"
#include "lb/io/json_file.h"

namespace lb::train {

MetricsLog::MetricsLog(const std::string& path, bool enabled) : path_(path) {
  if (!enabled) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  LB_CHECK(fd_ >= 0, "cannot write ", path, ": ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& line) {
  if (fd_ < 0) return;
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
