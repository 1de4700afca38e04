// Logger / Progress (see progress.h).
#include "lb/train/run/progress.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>

namespace lb::train {

namespace {
// Log lines go to stderr: stdout carries results (the final metrics JSON).
spdlog::logger& console() {
  static std::shared_ptr<spdlog::logger> l = [] {
    auto lg = spdlog::stderr_color_mt("leanback");
    lg->set_pattern("[%Y-%m-%d %H:%M:%S] %^%l%$ %v");
    return lg;
  }();
  return *l;
}
}  // namespace

void Logger::info(const std::string& msg) const {
  if (!quiet_) console().info("{}", msg);
}
void Logger::warn(const std::string& msg) const { console().warn("{}", msg); }

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

}  // namespace lb::train
