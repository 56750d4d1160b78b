#pragma once
// Running code that may crash in a child process of its own (inside
// libpolyhal, not installed): a plugin being loaded, libhdf5 parsing a file
// from outside. The parent learns how the child ended and what it reported.
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>

namespace polyhal::detail {

/// How a child ended.
struct ChildOutcome {
  bool finished = true;  ///< false: still running at the deadline, and killed
  int signal = 0;        ///< the signal that ended it, 0 if it exited
  int exit_status = 0;   ///< its exit status when it exited
  std::string report;    ///< what `body` returned (empty if it never did)
  bool reported() const noexcept { return finished && signal == 0 && exit_status == 0; }
};

/// Forks, runs `body` in the child and sends its result back through a
/// pipe; the child leaves with _exit, running no destructor or atexit
/// handler of anything it loaded. Crash signals get their default action in
/// the child, so a crash is seen as the signal even under a sanitizer. A
/// report longer than `max_report` bytes counts as none. Fork before any
/// thread holds a lock the child needs: the child has only this thread.
ChildOutcome run_in_child(const std::function<std::string()>& body, std::chrono::seconds timeout,
                          std::size_t max_report);

/// "signal 11 (SIGSEGV)".
std::string signal_text(int sig);

}  // namespace polyhal::detail
