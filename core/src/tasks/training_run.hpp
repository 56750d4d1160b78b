#pragma once
// What every training task (pretrain, squad, glue) does alike around its
// loop: read the starting weights naming the key that gave them, say where
// a resumed job stands, and write the final export, also the one a finished
// run is missing.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/config.hpp"
#include "train/training_job.hpp"

namespace polyhal {

/// The weights at `file` (a checkpoint, safetensors, a model directory's
/// or a TensorFlow checkpoint) for `model` with `head`; a file that is not
/// one is a ConfigError naming `key` where the config set it (file:line).
TensorMap read_located_start(const RunConfig& config, const std::string& key,
                             const std::filesystem::path& file, const BertConfig& model,
                             const TaskHead& head);

/// Rank 0 of a resumed job says where it stands in `dir`: nothing to do
/// (at `total` steps already), or resuming from `done`.
void print_resume(const TrainingJob& job, std::int64_t done, std::int64_t total,
                  const std::filesystem::path& dir);

/// Whether the run's final weights go to `export_dir` (a Hugging Face
/// directory) now: by the lead, when the run trained steps to its end, or
/// when a finished run is run again and its export is not whole (it stopped
/// before the export was written); never after a stop signal.
bool export_due(const TrainingJob& job, const std::filesystem::path& export_dir, std::int64_t done,
                std::int64_t total, int stopped_by_signal);

}  // namespace polyhal
