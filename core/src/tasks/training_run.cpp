#include "tasks/training_run.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/error.hpp"
#include "tasks/training_setup.hpp"

namespace polyhal {

TensorMap read_located_start(const RunConfig& config, const std::string& key,
                             const std::filesystem::path& file, const BertConfig& model,
                             const TaskHead& head) {
  try {
    // A model directory: its model.safetensors or its one TensorFlow checkpoint.
    return read_start_weights(std::filesystem::is_directory(file) ? model_weights_in(file) : file,
                              model, head, config.model.seed);
  } catch (const ConfigError& e) {
    throw config.error(key, e.what());
  }
}

void print_resume(const TrainingJob& job, std::int64_t done, std::int64_t total,
                  const std::filesystem::path& dir) {
  const auto& from = job.resumed();
  if (!from || !job.lead()) return;
  if (done >= total)
    std::cout << fmt::format(
        "  nothing to do: {} is at step {} of {}{} (remove it, or set checkpoint.resume=false, "
        "to train again)\n",
        dir.string(), done, total,
        from->loss ? fmt::format(", final loss {:.4f}", *from->loss) : std::string());
  else
    std::cout << fmt::format("  resuming from step {} of {}: {}\n", done, total,
                             from->checkpoint.string());
}

bool export_due(const TrainingJob& job, const std::filesystem::path& export_dir, std::int64_t done,
                std::int64_t total, int stopped_by_signal) {
  if (!job.lead() || export_dir.empty() || total <= 0 || stopped_by_signal) return false;
  if (total > done) return true;
  const bool whole = holds_hf_model(export_dir);
  if (total == done && !whole) {
    spdlog::info("the run had finished; writing its missing export {}", export_dir.string());
    return true;
  }
  return false;
}

TrainingOutcome run_training(const TrainingRecipe& recipe, TrainingJob& job,
                             const TaskContext& context) {
  const OutputPlan& outputs = context.plan.outputs;
  const CheckpointStore store(outputs.checkpoint_dir);
  LossScaler scaler = context.plan.precision.loss_scaler;
  TrainingOutcome out;
  const std::int64_t done =
      job.start(store, outputs.resume, recipe.start_weights, scaler, recipe.resume_check);
  out.done_before = done;
  if (job.lead()) out.resumed = job.resumed();
  print_resume(job, done, recipe.total_steps, outputs.checkpoint_dir);
  TrainerSettings settings =
      trainer_settings(context.config, recipe.total_steps, recipe.schedule, recipe.metadata,
                       job.sharded(), context.plan.placement);
  settings.metadata["writer"] = recipe.writer;
  settings.stop_signal = context.options.stop_signal;
  settings.stop_listeners = context.options.stop_listeners;
  job.run([&](TrainingModel& model, Communicator& replicas) {
    LossScaler replica_scaler = scaler;
    Trainer trainer(model, replicas, settings, recipe.batches, store, replica_scaler);
    recipe.loop(trainer, model, replicas, done, out.log);
  });
  if (export_due(job, outputs.export_dir, done, recipe.total_steps, out.log.stopped_by_signal)) {
    recipe.write_export(outputs.export_dir, job.weights());
    out.exported = outputs.export_dir;
  }
  return out;
}

}  // namespace polyhal
