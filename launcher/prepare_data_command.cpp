// `polyhal prepare-data`: text to MLPerf HDF5 pre-training data
// (prepare_data.hpp), optionally packed, and what it made.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/progress.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

int prepare_data(const PrepareDataOptions& options, const std::optional<PackOptions>& pack,
                 ProgressMode progress) {
  Progress show(progress);
  const PrepareDataReport r = prepare_pretraining_data(options, show);
  if (r.invalid_utf8 > 0) {
    spdlog::warn(
        "{} byte sequence{} of invalid UTF-8 replaced (and dropped as U+FFFD); first at {}",
        r.invalid_utf8, r.invalid_utf8 == 1 ? "" : "s", r.first_invalid);
  }
  if (r.empty_documents > 0) {
    spdlog::warn("{} document{} with no token left out (only characters the tokenizer removes)",
                 r.empty_documents, r.empty_documents == 1 ? "" : "s");
  }
  const double mb = static_cast<double>(r.bytes) / 1e6;
  std::cout << fmt::format(
      "read {} file{}: {:.1f} MB, {} lines, {} documents, {} sentences\n"
      "made {} instances of at most {} tokens ({} pass{} over the documents, seed {}, {} "
      "shard{})\n"
      "  random next segment: {:.1f}%; masked: {:.1f}% of tokens; mean length {:.1f} tokens\n"
      "  {:.1f} s, {:.2f} MB of text per second\n",
      r.files, r.files == 1 ? "" : "s", mb, r.lines, r.documents, r.sentences, r.instances,
      options.max_seq_len, options.dupe_factor, options.dupe_factor == 1 ? "" : "es", options.seed,
      options.shards, options.shards == 1 ? "" : "s",
      100.0 * static_cast<double>(r.random_next) / static_cast<double>(r.instances),
      100.0 * static_cast<double>(r.masked_tokens) / static_cast<double>(r.real_tokens),
      static_cast<double>(r.real_tokens) / static_cast<double>(r.instances), r.seconds,
      mb / r.seconds);
  for (const auto& file : r.files_written) std::cout << "  wrote " << file.string() << '\n';
  if (!pack) return 0;
  PackOptions packing = *pack;
  packing.input = options.output;
  packing.output = options.output / "packed";
  packing.max_seq_len = options.max_seq_len;
  return pack_data(packing, progress);
}

int prepare_data_command(CommandLine& cl, int, char**) {
  if (cl.inputs.empty() || cl.vocab.empty() || cl.pack.output.empty())
    throw UsageError(fmt::format("'prepare-data' needs --input, --vocab and --output\n{}",
                                 command_help("prepare-data")));
  if (cl.cased && cl.lower_case) throw UsageError("--lower-case and --cased: give one");
  if (cl.special_tokens != "split" && cl.special_tokens != "keep")
    throw UsageError(
        fmt::format("--special-tokens: expected split (BERT's reference) or keep, got '{}'",
                    cl.special_tokens));
  auto& prepare = cl.prepare;
  for (const auto& input : cl.inputs) prepare.inputs.emplace_back(input);
  prepare.vocab = cl.vocab;
  prepare.output = cl.pack.output;
  prepare.lower_case = !cl.cased;
  prepare.special_tokens =
      cl.special_tokens == "keep" ? SpecialTokensInText::keep : SpecialTokensInText::split;
  if (cl.max_seq_len_given) prepare.max_seq_len = cl.pack.max_seq_len;
  std::optional<PackOptions> packing;
  if (!cl.pack_after.empty()) {
    packing = cl.pack;
    packing->algorithm = cl.pack_after;
  }
  return prepare_data(prepare, packing, cl.run.progress);
}

}  // namespace polyhal
