#pragma once
// Task pretrain's config: its one-value section `steps`, its held-out
// evaluation `eval`, and its schema.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "polyhal/app/config.hpp"
#include "polyhal/app/config_schema.hpp"

namespace polyhal {

struct StepsSection {
  static constexpr const char* kSection = "steps";
  std::int64_t steps = 100;  ///< optimizer steps to train; 0: evaluate only
};

/// Training by samples, as MLPerf and the seeds count pre-training: the
/// steps are ceil(samples / global batch). Instead of `steps`.
struct SamplesSection {
  static constexpr const char* kSection = "samples";
  std::int64_t samples = 0;  ///< 0: `steps` decides
};

/// The optimizer steps of a pre-training run with `global_batch` samples
/// per step: `steps`, or `samples` rounded up to whole steps.
std::int64_t pretrain_steps(const RunConfig& config, std::int64_t global_batch);

/// Evaluation during pre-training on held-out data (docs/pretraining.md):
/// masked-LM accuracy as MLPerf defines it, NSP accuracy and the eval
/// losses, every `every_steps` steps or `every_samples` samples and at the
/// end; `stop_at` ends the run, with a checkpoint, once the masked-LM
/// accuracy reaches it. Off unless `files` or `source` is given.
struct EvalSection {
  static constexpr const char* kSection = "eval";
  std::string source;                 ///< empty: data.source
  std::filesystem::path files;        ///< mlperf_hdf5 / tfrecord: a file or a directory
  std::optional<std::uint64_t> seed;  ///< generated / pattern: unset is data.seed + 1
  std::int64_t samples = 0;           ///< rows evaluated; 0: every row of the files (256 generated)
  std::int64_t micro = 0;             ///< rows per evaluation batch; 0: batch.micro
  std::int64_t every_steps = 0;       ///< 0: see every_samples
  std::int64_t every_samples = 0;     ///< 0: only at the end (unless every_steps)
  double stop_at = 0.0;               ///< masked-LM accuracy that ends the run; 0: off
  bool enabled() const { return !files.empty() || !source.empty(); }
};

const TaskSchema& pretrain_schema();

}  // namespace polyhal
