// Console output of long work: on a terminal a one-line progress bar with throughput and ETA,
// redrawn in place, with log lines printed above it; otherwise plain timestamped log lines
// (spdlog), as Hugging Face's Trainer does with tqdm.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace lb::train {

class Logger {
 public:
  explicit Logger(bool quiet = false) : quiet_(quiet) {}
  void info(const std::string& msg) const;
  void warn(const std::string& msg) const;

 private:
  bool quiet_;
};

class Progress {
 public:
  Progress(int64_t total, bool bar, bool quiet);
  // After step `done` of `total`: the step's loss and examples/s.
  void update(int64_t done, double loss, double examples_per_s);
  void log(const std::string& line);  // a log line (above the bar on a terminal)
  void pause();                       // clears the bar before other output (evaluation)
  void finish();

 private:
  void draw();
  int64_t total_, done_ = 0, start_done_ = -1;
  bool bar_, quiet_, drawn_ = false;
  double loss_ = 0, ex_per_s_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace lb::train
