// `polyhal pack`: packs MLPerf HDF5 pre-training data (packed_data.hpp) and
// says what it achieved.
#include <fmt/format.h>

#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/progress.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

int pack_data(const PackOptions& options, ProgressMode progress) {
  Progress show(progress);
  const PackResult r = pack_mlperf_hdf5(options, show);
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

int pack_command(CommandLine& cl, int, char**) {
  if (cl.inputs.size() != 1 || cl.pack.output.empty())
    throw UsageError(
        fmt::format("'pack' needs one --input and --output\n{}", command_help("pack")));
  cl.pack.input = cl.inputs.front();
  return pack_data(cl.pack, cl.run.progress);
}

}  // namespace polyhal
