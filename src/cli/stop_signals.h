// Ctrl-C (SIGINT), SIGTERM (what `kill` and schedulers send) and SIGUSR1 (what mpirun passes
// on to every rank at once; `train --nproc` sends it for Ctrl-C) ask a training command to
// stop after the current step and write a resumable checkpoint; a second signal of the same
// kind ends the process at once. The exit status names the signal, as a shell expects: 130
// for SIGINT, 143 for SIGTERM.
#pragma once
#include <csignal>

#include "lb/train/trainer.h"

namespace lb::cli {

class StopSignals {
 public:
  StopSignals() {
    received() = 0;
    for (int sig : {SIGINT, SIGTERM, SIGUSR1}) std::signal(sig, on_signal);
  }
  ~StopSignals() {
    for (int sig : {SIGINT, SIGTERM, SIGUSR1}) std::signal(sig, SIG_DFL);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 128 + the signal that stopped the run (130 when interrupted without one: a test hook).
  static int exit_code() { return 128 + (received() != 0 ? static_cast<int>(received()) : SIGINT); }

 private:
  static volatile std::sig_atomic_t& received() {
    static volatile std::sig_atomic_t sig = 0;
    return sig;
  }
  static void on_signal(int sig) {
    received() = sig;
    train::stop_requested() = true;
    std::signal(sig, SIG_DFL);  // the second one ends the process
  }
};

}  // namespace lb::cli
