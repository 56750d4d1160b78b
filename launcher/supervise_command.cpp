// `polyhal supervise` and `run --max-restarts`: restarts a job that lost a
// replica, in the spirit of torchrun's elastic restarts. The job resumes from
// its last checkpoint because a training run with checkpoint.dir resumes by
// default; the supervisor itself keeps no state but the restart count.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// How a child ended, as a shell reports it: its exit code, or 128 + the
/// signal that killed it.
struct Outcome {
  int code = 0;
  int signal = 0;  ///< 0: it exited
  std::string text() const {
    return signal ? fmt::format("was killed by signal {} ({})", signal, strsignal(signal))
                  : fmt::format("ended with exit code {}", code);
  }
};

/// Lost replicas are what a restart fixes: a rank's collective timed out
/// (exit 4, also mpirun's code after a rank's MPI_Abort), or a process died
/// by a signal (mpirun reports a killed rank as 128 + signal). Failures of
/// the config, the data or a plugin (1, 2, 3) would fail again.
bool restart_helps(const Outcome& outcome) {
  return outcome.signal != 0 || outcome.code == static_cast<int>(ExitCode::lost_rank) ||
         outcome.code > 128;
}

/// Starts `command` and waits for it, passing SIGINT, SIGTERM and SIGUSR1 on to it.
/// `interrupted` is set when such a signal arrived: the user's stop is no
/// lost replica. The signals are taken with sigwait, so no handler and no
/// global state are involved.
Outcome run_once(const std::vector<std::string>& command, bool& interrupted) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGCHLD);
  sigset_t before;
  pthread_sigmask(SIG_BLOCK, &signals, &before);
  const pid_t child = fork();
  if (child < 0) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    throw RuntimeFailure(fmt::format("supervise: cannot start a process: {}", strerror(errno)));
  }
  if (child == 0) {
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
    std::vector<char*> argv;
    for (const auto& word : command) argv.push_back(const_cast<char*>(word.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const std::string message = fmt::format("polyhal: error: supervise: cannot run '{}': {}\n",
                                            command.front(), strerror(errno));
    [[maybe_unused]] const auto written = write(STDERR_FILENO, message.data(), message.size());
    _exit(static_cast<int>(ExitCode::unavailable));
  }
  Outcome outcome;
  for (;;) {
    int signal = 0;
    sigwait(&signals, &signal);
    if (signal == SIGINT || signal == SIGTERM || signal == SIGUSR1) {
      interrupted = true;
      kill(child, signal);
      continue;
    }
    int status = 0;
    const pid_t done = waitpid(child, &status, WNOHANG);
    if (done != child) continue;  // another child's SIGCHLD (none are expected)
    if (WIFSIGNALED(status))
      outcome = {128 + WTERMSIG(status), WTERMSIG(status)};
    else
      outcome.code = WEXITSTATUS(status);
    break;
  }
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return outcome;
}

/// Whether execvp can run `name`: an executable file at that path, or (a
/// name without '/') in a directory of PATH.
bool runnable(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0;
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const auto colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    const std::string file = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0)
      return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}

}  // namespace

int supervise(const std::vector<std::string>& command, int max_restarts) {
  if (command.empty())
    throw UsageError("supervise: no command given (polyhal supervise --max-restarts N -- CMD...)");
  if (!runnable(command.front()))
    throw UsageError(fmt::format(
        "supervise: '{}' is not a command here (no such executable file{}): check the job's "
        "command after '--'",
        command.front(), command.front().find('/') == std::string::npos ? " in PATH" : ""));
  if (max_restarts < 0 || max_restarts > 1000)
    throw UsageError(fmt::format("--max-restarts: expected 0 to 1000, got {}", max_restarts));
  for (int restarts = 0;; ++restarts) {
    bool interrupted = false;
    const Outcome outcome = run_once(command, interrupted);
    if (outcome.code == 0) {
      if (restarts > 0)
        spdlog::info("supervise: the job finished after {} restart{}", restarts,
                     restarts == 1 ? "" : "s");
      return 0;
    }
    if (interrupted) {
      spdlog::warn("supervise: the job {} after it was interrupted; not restarting",
                   outcome.text());
      return outcome.code;
    }
    if (!restart_helps(outcome)) {
      spdlog::error("supervise: the job {}: a failure a restart would repeat; not restarting",
                    outcome.text());
      return outcome.code;
    }
    if (restarts == max_restarts) {
      spdlog::error(
          "supervise: the job {} and has been restarted {} time{} (--max-restarts); "
          "giving up",
          outcome.text(), restarts, restarts == 1 ? "" : "s");
      return outcome.code;
    }
    spdlog::warn(
        "supervise: the job {} (a lost replica); restart {} of {} in {} s, from its "
        "last checkpoint",
        outcome.text(), restarts + 1, max_restarts, kRestartDelay.count());
    // Lets the old processes' ports and shared-memory segments go first.
    std::this_thread::sleep_for(kRestartDelay);
  }
}

int supervise_command(CommandLine& cl, int, char**) {
  if (cl.inputs.empty())
    throw UsageError(fmt::format("'supervise' needs the job's command after '--'\n{}",
                                 command_help("supervise")));
  return supervise(cl.inputs, cl.max_restarts.value_or(3));
}

}  // namespace polyhal
