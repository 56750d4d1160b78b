#pragma once
// Progress of a long command: a live bar with the elapsed time and an ETA on
// a terminal; on a pipe or a log file a plain line per tenth of each phase,
// so logs stay readable.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/error.hpp"

namespace polyhal {

/// --progress: auto (a live bar on a terminal, plain lines otherwise), bar,
/// lines, or none.
enum class ProgressMode { automatic, bar, lines, none };

inline ProgressMode progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "bar") return ProgressMode::bar;
  if (text == "lines") return ProgressMode::lines;
  if (text == "none") return ProgressMode::none;
  throw UsageError(fmt::format("--progress: expected auto, bar, lines or none, got '{}'", text));
}

/// Whether progress rewrites one line in place. Under mpirun stdout may be a
/// pseudo-terminal whose output ends up in a log, so auto is lines there.
inline bool live_progress(ProgressMode mode) {
  if (mode != ProgressMode::automatic) return mode == ProgressMode::bar;
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr &&
         std::getenv("PMI_SIZE") == nullptr;
}

class Progress {
 public:
  explicit Progress(ProgressMode mode)
      : terminal_(live_progress(mode)), silent_(mode == ProgressMode::none) {}

  void operator()(const std::string& phase, std::int64_t done, std::int64_t total) {
    if (silent_) return;
    const double fraction =
        total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
    if (phase != phase_) {
      phase_started_ = std::chrono::steady_clock::now();
      shown_tenth_ = -1;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - phase_started_).count();
    const std::string eta = fraction > 0.0 && fraction < 1.0
                                ? fmt::format(", ETA {:.0f} s", elapsed / fraction - elapsed)
                                : "";
    if (terminal_) {
      const auto filled = static_cast<std::size_t>(fraction * 30);
      std::cout << fmt::format("\r{:<10} [{:<30}] {:>5.1f}% {}/{} ({:.0f} s{})", phase,
                               std::string(filled, '#'), fraction * 100, done, total, elapsed, eta)
                << (done >= total ? "\n" : "") << std::flush;
    } else if (const auto tenth = static_cast<std::int64_t>(fraction * 10);
               phase != phase_ || tenth != shown_tenth_) {
      std::cout << fmt::format("{}: {}/{} ({:.0f}%{})\n", phase, done, total, fraction * 100, eta);
      shown_tenth_ = tenth;
    }
    phase_ = phase;
  }

 private:
  bool terminal_, silent_;
  std::string phase_;
  std::int64_t shown_tenth_ = -1;
  std::chrono::steady_clock::time_point phase_started_ = std::chrono::steady_clock::now();
};

}  // namespace polyhal
