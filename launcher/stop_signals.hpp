#pragma once
// SIGINT, SIGTERM and SIGUSR1 during a run: finish the step, checkpoint,
// report, and exit 130 / 143 / 138 as schedulers (Slurm, Kubernetes, systemd)
// expect, instead of losing the work since the last checkpoint. SIGUSR1 is
// the one mpirun passes to its ranks without killing them after a fixed
// quarter second (Open MPI 5), and Slurm's `--signal=USR1@SECONDS` sends.
#include <signal.h>

#include <atomic>
#include <thread>

namespace polyhal {

/// While alive, SIGINT, SIGTERM and SIGUSR1 no longer end the process at any point:
/// while a training loop runs (listeners() above 0), the first one sets
/// requested() (to the signal's number), which the loop reads after each
/// step; a second one, or the first while no loop listens (inference,
/// matmul-bench, setup, evaluation alone: nothing to checkpoint), ends the
/// process at once with 128 + its number. Construct it before any other thread starts (OpenMP,
/// MPI, TBB): threads inherit the blocked signals, so only its watcher
/// takes them (sigtimedwait; no handler, no global state).
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  const std::atomic<int>& requested() const noexcept { return signal_; }
  /// How many training loops read requested() now (they count themselves).
  std::atomic<int>& listeners() noexcept { return listeners_; }
  /// The exit code of a run that a signal stopped (130, 143, 138), else `code`.
  int exit_code(int code) const noexcept { return signal_ != 0 ? 128 + signal_ : code; }

 private:
  sigset_t signals_;
  sigset_t before_;
  std::atomic<int> signal_{0};
  std::atomic<int> listeners_{0};
  std::jthread watcher_;
};

}  // namespace polyhal
