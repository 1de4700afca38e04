// metrics.jsonl of a run directory, written and read here: one JSON object per line (the
// line types are listed in trainer.h). A line is appended whole or not at all: a failed write (a full disk) is cut
// back to the previous line's end and reported as an error naming the file, never left torn.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace lb::train {

class EventFile;

class MetricsLog {
 public:
  // enabled = false (data-parallel ranks other than 0): writes nothing.
  MetricsLog(const std::string& path, bool enabled);
  // The same, also mirroring the numbers of the "train" and "eval" lines as scalars for the
  // tools people read, beside `path` (a run directory's metrics.jsonl): scalars.csv (step,
  // tag, value; rewritten from the lines metrics.jsonl holds now, then appended) and a
  // TensorBoard event file, events.out.tfevents.<time>.<host>.<pid>.<n> (a resumed run starts a new
  // one, whose restart at `resumed_step` hides the old files' later points). Tags as Hugging
  // Face's: "train/loss", "train/lr", "eval/accuracy", ... Both names go in the run's marker.
  MetricsLog(const std::string& path, bool enabled, int64_t resumed_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& line);

 private:
  void mirror(const nlohmann::json& line);
  std::string path_;
  int fd_ = -1;
  int csv_fd_ = -1;
  std::string csv_path_;
  std::unique_ptr<EventFile> events_;
};

// The scalars of a metrics line: (tag, value) for each number of a "train" line
// ("train/<key>") or an "eval" line ("eval/<key>", its eval_ prefix dropped); none else.
std::vector<std::pair<std::string, double>> line_scalars(const nlohmann::json& line);

// Every line of a metrics.jsonl, in order. A torn last line (a run killed mid-write) is
// skipped; any other line that is not JSON is an error naming the file and line.
std::vector<nlohmann::json> read_metrics(const std::string& path);

// Drops the lines past `step` (all but the "run" line carry a step): a resumed run writes
// them again. Lines torn by a kill are dropped too.
void truncate_metrics(const std::string& path, int64_t step);

}  // namespace lb::train
