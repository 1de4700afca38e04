// metrics.jsonl of a run directory, written and read here: one JSON object per line (the
// line types are listed in trainer.h). A line is appended whole or not at all: a failed write (a full disk) is cut
// back to the previous line's end and reported as an error naming the file, never left torn.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lb::train {

class MetricsLog {
 public:
  // enabled = false (data-parallel ranks other than 0): writes nothing.
  MetricsLog(const std::string& path, bool enabled);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const nlohmann::json& line);

 private:
  std::string path_;
  int fd_ = -1;
};

// Every line of a metrics.jsonl, in order. A torn last line (a run killed mid-write) is
// skipped; any other line that is not JSON is an error naming the file and line.
std::vector<nlohmann::json> read_metrics(const std::string& path);

// Drops the lines past `step` (all but the "run" line carry a step): a resumed run writes
// them again. Lines torn by a kill are dropped too.
void truncate_metrics(const std::string& path, int64_t step);

}  // namespace lb::train
