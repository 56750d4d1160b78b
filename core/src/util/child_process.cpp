#include "util/child_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "polyhal/error.hpp"

namespace polyhal::detail {
namespace {

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent sees a cut report
    done += static_cast<std::size_t>(n);
  }
}

/// Reads until the child closes the pipe (true) or the deadline (false).
bool read_until_closed(int fd, std::chrono::steady_clock::time_point deadline,
                       std::size_t max_report, std::string& text, bool& too_long) {
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd waiting{fd, POLLIN, 0};
    const int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return false;
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    if (text.size() + static_cast<std::size_t>(n) > max_report) too_long = true;
    if (!too_long) text.append(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? fmt::format("signal {} (SIG{})", sig, abbrev)
                           : fmt::format("signal {}", sig);
}

ChildOutcome run_in_child(const std::function<std::string()>& body, std::chrono::seconds timeout,
                          std::size_t max_report) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw RuntimeFailure(fmt::format("cannot start a child process: pipe: {}", ::strerror(errno)));
  std::fflush(nullptr);  // nothing buffered here may be written twice
  const pid_t child = ::fork();
  if (child < 0) {
    const int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw RuntimeFailure(fmt::format("cannot start a child process: fork: {}", ::strerror(error)));
  }
  if (child == 0) {
    ::close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) ::signal(sig, SIG_DFL);
    int status = 0;
    try {
      write_all(fds[1], body());
    } catch (...) {
      status = 3;  // the body must report its own errors; this is a fault
    }
    ::_exit(status);
  }
  ::close(fds[1]);
  ChildOutcome outcome;
  bool too_long = false;
  outcome.finished = read_until_closed(fds[0], std::chrono::steady_clock::now() + timeout,
                                       max_report, outcome.report, too_long);
  ::close(fds[0]);
  if (!outcome.finished) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
  if (WIFEXITED(status)) outcome.exit_status = WEXITSTATUS(status);
  if (too_long || !outcome.reported()) outcome.report.clear();
  if (too_long && outcome.exit_status == 0) outcome.exit_status = 3;
  return outcome;
}

}  // namespace polyhal::detail
