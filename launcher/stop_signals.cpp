#include "stop_signals.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>

namespace polyhal {

StopSignals::StopSignals() {
  sigemptyset(&signals_);
  sigaddset(&signals_, SIGINT);
  sigaddset(&signals_, SIGTERM);
  sigaddset(&signals_, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals_, &before_);
  watcher_ = std::jthread([this](std::stop_token stop) {
    const timespec poll{0, 200'000'000};  // how soon the watcher notices it should end
    while (!stop.stop_requested()) {
      const int signal = sigtimedwait(&signals_, nullptr, &poll);
      if (signal < 0) continue;  // timeout or EINTR
      if (signal_ != 0 || listeners_ == 0) {
        const std::string message =
            signal_ != 0 ? fmt::format("polyhal: {} again: stopping now, without a checkpoint\n",
                                       strsignal(signal))
                         : fmt::format(
                               "polyhal: {}: stopping now (no training step in flight to "
                               "checkpoint)\n",
                               strsignal(signal));
        [[maybe_unused]] const auto written = write(STDERR_FILENO, message.data(), message.size());
        std::_Exit(128 + signal);
      }
      signal_ = signal;
      const std::string message = fmt::format(
          "polyhal: {}: the run stops after this step, with a checkpoint when checkpoint.dir is "
          "set (send it again to stop at once)\n",
          strsignal(signal));
      [[maybe_unused]] const auto written = write(STDERR_FILENO, message.data(), message.size());
    }
  });
}

StopSignals::~StopSignals() {
  watcher_.request_stop();
  watcher_.join();
  // A signal that arrived after the run finished is still pending: taken
  // here, so restoring the mask does not kill the process after it reported.
  const timespec none{0, 0};
  while (sigtimedwait(&signals_, nullptr, &none) > 0) {
  }
  pthread_sigmask(SIG_SETMASK, &before_, nullptr);
}

}  // namespace polyhal
