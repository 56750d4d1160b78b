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
#include "polyhal/app/task.hpp"
#include "train/trainer.hpp"
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

/// What a training task brings to run_training: how its weights start,
/// what a checkpoint must hold to be resumed, its steps and schedule, how a
/// step's batch is made, what one replica does with its Trainer (the loop:
/// steps, evaluations), and how the result is exported (where: the plan's
/// outputs).
struct TrainingRecipe {
  std::string writer;  ///< "polyhal pretrain": in every checkpoint's metadata
  std::function<TensorMap()> start_weights;
  ResumeCheck resume_check{};  ///< empty: the job's own checks only
  std::int64_t total_steps = 0;
  OptimizerSection schedule;  ///< learning rate, warm-up, decay
  std::map<std::string, std::string> metadata;
  BatchSource batches;
  /// One replica's loop: runs `trainer` from step `done` + 1, recording in `log`.
  std::function<void(Trainer& trainer, TrainingModel& model, Communicator& replicas,
                     std::int64_t done, TrainingLog& log)>
      loop{};
  /// Writes the final weights into the plan's outputs.export_dir (a Hugging
  /// Face directory), when it names one.
  std::function<void(const std::filesystem::path& dir, const TensorMap& weights)> write_export{};
};

/// What run_training did, for the task's result and report.
struct TrainingOutcome {
  std::int64_t done_before = 0;  ///< steps a resumed checkpoint had
  std::optional<TrainingJob::ResumedFrom> resumed;
  TrainingLog log;
  std::filesystem::path exported;
};

/// The one training call every training task makes, after planning `job`:
/// starts it (resuming from context.config.checkpoint.dir, or the recipe's
/// start weights), says where a resumed job stands, runs a Trainer per
/// replica with the recipe's loop (stopped by context.options.stop_signal
/// after a step, with a checkpoint), and exports the final weights when
/// export_due says so, a finished run's missing export included.
TrainingOutcome run_training(const TrainingRecipe& recipe, TrainingJob& job,
                             const TaskContext& context);

/// The fields every training task's result has (PretrainResult,
/// FinetuneResult), filled from the training call's outcome.
template <class Result>
void record_training_outcome(TrainingOutcome& out, Result& result) {
  result.first_step = out.done_before + 1;
  result.steps = std::move(out.log.steps);
  result.checkpoints = std::move(out.log.checkpoints);
  result.stopped_by_signal = out.log.stopped_by_signal;
  result.exported = out.exported;
}

}  // namespace polyhal
