// Console output of long work: on a terminal a one-line progress bar with throughput and ETA,
// redrawn in place, with log lines printed above it; otherwise plain timestamped log lines
// (spdlog), as Hugging Face's Trainer does with tqdm.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace lb::train {

class Logger {
 public:
  explicit Logger(bool quiet = false) : quiet_(quiet) {}
  void info(const std::string& msg) const;
  void warn(const std::string& msg) const;
  // Lines as they are, without time or level (a table), where info lines go.
  void block(const std::string& text) const;
  bool quiet() const { return quiet_; }

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
  bool bar() const { return bar_; }  // drawn in place (a terminal)

 private:
  void draw();
  int64_t total_, done_ = 0, start_done_ = -1;
  bool bar_, quiet_, drawn_ = false;
  double loss_ = 0, ex_per_s_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

// While it lives, the log lines (Logger, Progress::log, PhaseProgress) also go to the file at
// `path`, appended (a resumed run's train.log goes on); progress bars drawn in place do not.
class LogFile {
 public:
  explicit LogFile(const std::string& path);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

 private:
  std::shared_ptr<void> sink_;  // the spdlog sink (kept out of this header)
};

// The progress of a phase that is not training steps (calibration, evaluation, prediction),
// so that no phase runs silent: on a terminal one line redrawn in place ("evaluation: 12/40
// batches  0:07  ETA 0:23"); otherwise a log line once the phase has run kFirstLine, then
// every kEveryLine, and a closing line with its time when it printed any. A phase may pass
// through stages ("batches", then "layers"), each with its own count and ETA.
class PhaseProgress {
 public:
  static constexpr std::chrono::milliseconds kFirstLine{5000}, kEveryLine{10000};
  PhaseProgress(std::string what, bool bar, bool quiet, std::chrono::milliseconds first_line = kFirstLine,
                std::chrono::milliseconds every_line = kEveryLine);
  ~PhaseProgress() { clear(); }
  PhaseProgress(const PhaseProgress&) = delete;
  PhaseProgress& operator=(const PhaseProgress&) = delete;
  // `done` of `total` `unit` (e.g. 3 of 8 "batches") are through.
  void update(const std::string& unit, int64_t done, int64_t total);
  void finish();

 private:
  std::string line() const;
  void clear();
  std::string what_, unit_;
  int64_t done_ = 0, total_ = 0;
  bool bar_, quiet_, drawn_ = false, logged_ = false, finished_ = false;
  std::chrono::milliseconds first_line_, every_line_;
  std::chrono::steady_clock::time_point start_, stage_start_, last_;
};

}  // namespace lb::train
