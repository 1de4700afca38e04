// Logger / Progress (see progress.h).
#include "lb/train/run/progress.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

namespace lb::train {

namespace {
constexpr const char* kConsolePattern = "[%Y-%m-%d %H:%M:%S] %^%l%$ %v";
constexpr const char* kFilePattern = "[%Y-%m-%d %H:%M:%S] %l %v";

// Log lines go to stderr: stdout carries results (the final metrics JSON).
spdlog::logger& console() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = spdlog::stderr_color_mt("leanback");
    lg->set_pattern(kConsolePattern);
    return lg;
  }();
  return *l;
}
}  // namespace

LogFile::LogFile(const std::string& path) {
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, /*truncate=*/false);
  sink->set_pattern(kFilePattern);
  console().sinks().push_back(sink);
  sink_ = sink;
}

LogFile::~LogFile() {
  auto& sinks = console().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), std::static_pointer_cast<spdlog::sinks::sink>(sink_)),
              sinks.end());
}

void Logger::info(const std::string& msg) const {
  if (!quiet_) console().info("{}", msg);
}
void Logger::warn(const std::string& msg) const { console().warn("{}", msg); }

void Logger::block(const std::string& text) const {
  if (quiet_ || text.empty()) return;
  spdlog::logger& l = console();
  l.set_pattern("%v");
  l.info("{}", text.back() == '\n' ? text.substr(0, text.size() - 1) : text);
  // The first sink is the terminal's; any other is a LogFile's.
  for (size_t i = 0; i < l.sinks().size(); ++i) l.sinks()[i]->set_pattern(i == 0 ? kConsolePattern : kFilePattern);
}

Progress::Progress(int64_t total, bool bar, bool quiet)
    : total_(total), bar_(bar && !quiet), quiet_(quiet), start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void Progress::update(int64_t done, double loss, double examples_per_s) {
  if (start_done_ < 0) {
    start_done_ = done - 1;
    start_ = std::chrono::steady_clock::now();
  }
  done_ = done;
  loss_ = loss;
  ex_per_s_ = examples_per_s;
  if (!bar_) return;
  const auto now = std::chrono::steady_clock::now();
  if (done_ < total_ && now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int64_t run = done_ - start_done_;
  const double per_step = run > 0 ? elapsed / static_cast<double>(run) : 0;
  const int64_t eta = static_cast<int64_t>(per_step * static_cast<double>(total_ - done_));
  constexpr int kWidth = 30;
  const int fill = total_ > 0 ? static_cast<int>(kWidth * done_ / total_) : 0;
  std::string barstr(static_cast<size_t>(fill), '#');
  barstr.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] %lld/%lld  %.1f ex/s  loss %.4f  ETA %lld:%02lld  ", barstr.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), ex_per_s_, loss_,
               static_cast<long long>(eta / 60), static_cast<long long>(eta % 60));
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::pause() {
  if (drawn_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
  }
}

void Progress::log(const std::string& line) {
  if (quiet_) return;
  pause();
  console().info("{}", line);
  if (bar_) draw();
}

void Progress::finish() {
  if (bar_ && done_ > 0) {
    draw();
    std::fprintf(stderr, "\n");
  }
  drawn_ = false;
}

PhaseProgress::PhaseProgress(std::string what, bool bar, bool quiet, std::chrono::milliseconds first_line,
                             std::chrono::milliseconds every_line)
    : what_(std::move(what)), bar_(bar && !quiet), quiet_(quiet), first_line_(first_line), every_line_(every_line),
      start_(std::chrono::steady_clock::now()), stage_start_(start_), last_(start_) {}

std::string PhaseProgress::line() const {
  using std::chrono::duration;
  const auto now = std::chrono::steady_clock::now();
  const auto clock = [](double s) {
    char buf[32];
    const auto t = static_cast<long long>(s);
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
    return std::string(buf);
  };
  const double elapsed = duration<double>(now - start_).count();
  const double in_stage = duration<double>(now - stage_start_).count();
  std::string out = what_ + ": " + std::to_string(done_) + "/" + std::to_string(total_) + " " + unit_ + "  " +
                    clock(elapsed);
  if (done_ > 0 && done_ < total_)
    out += "  ETA " + clock(in_stage / static_cast<double>(done_) * static_cast<double>(total_ - done_));
  return out;
}

void PhaseProgress::update(const std::string& unit, int64_t done, int64_t total) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (unit != unit_) stage_start_ = now;
  unit_ = unit;
  done_ = done;
  total_ = total;
  if (bar_) {
    // A phase under a second draws nothing; then a redraw at most every 200 ms.
    if (now - start_ < std::chrono::seconds(1) || (drawn_ && now - last_ < std::chrono::milliseconds(200))) return;
    last_ = now;
    std::fprintf(stderr, "\r\033[K%s", line().c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  if (now - start_ < first_line_ || (logged_ && now - last_ < every_line_)) return;
  last_ = now;
  logged_ = true;
  console().info("{}", line());
}

void PhaseProgress::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

void PhaseProgress::finish() {
  if (finished_) return;
  finished_ = true;
  const bool shown = drawn_ || logged_;
  clear();
  if (!shown || quiet_) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  console().info("{}: done, {} {} in {} s", what_, total_, unit_, buf);
}

}  // namespace lb::train
