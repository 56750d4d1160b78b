// `polyhal pack`: packs MLPerf HDF5 pre-training data (packed_data.hpp) and
// says what it achieved.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

#include "commands.hpp"
#include "polyhal/packed_data.hpp"

namespace polyhal::launcher {

int pack_data(const PackOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  // A live bar on a terminal; on a pipe or a log file a line per tenth.
  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  std::string shown_phase;
  std::int64_t shown_tenth = -1;
  const auto progress = [&](const std::string& phase, std::int64_t done, std::int64_t total) {
    const double fraction = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1;
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (terminal) {
      const auto filled = static_cast<int>(fraction * 30);
      std::cout << fmt::format("\r{:<8} [{:<30}] {:>5.1f}% {}/{} ({:.0f} s)", phase,
                               std::string(static_cast<std::size_t>(filled), '#'), fraction * 100,
                               done, total, elapsed)
                << (done == total ? "\n" : "") << std::flush;
      return;
    }
    const auto tenth = static_cast<std::int64_t>(fraction * 10);
    if (phase != shown_phase || tenth != shown_tenth) {
      std::cout << fmt::format("{}: {}/{} ({:.0f}%)\n", phase, done, total, fraction * 100);
      shown_phase = phase;
      shown_tenth = tenth;
    }
  };
  const PackResult r = pack_mlperf_hdf5(options, progress);
  const PackingStats& s = r.stats;
  std::cout << fmt::format(
      "packed {} sequences into {} packs of {} tokens ({}, at most {} per pack)\n"
      "  efficiency: {:.1f}% of tokens are real (unpacked: {:.1f}%)\n"
      "  theoretical speed-up: {:.3f}x (sequences per row)\n"
      "  masked positions per pack: at most {}\n",
      s.sequences, s.packs, s.max_len, options.algorithm, options.max_sequences_per_pack,
      100 * s.efficiency(), 100 * s.unpacked_efficiency(), s.speedup(), r.max_predictions_per_pack);
  for (const auto& file : r.files) std::cout << "  wrote " << file.string() << '\n';
  return 0;
}

}  // namespace polyhal::launcher
