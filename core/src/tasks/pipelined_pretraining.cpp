#include "tasks/pipelined_pretraining.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "polyhal/bert_weights.hpp"
#include "polyhal/checkpoint_store.hpp"
#include "polyhal/error.hpp"
#include "polyhal/loss_scaler.hpp"
#include "polyhal/lr_schedule.hpp"
#include "polyhal/pipelined_training.hpp"
#include "tasks/trainer.hpp"

namespace polyhal {
namespace {

/// What pipelining does not run yet (several replicas), refused with the key.
void refuse_unsupported(const RunConfig& config, bool compile_only) {
  const auto refuse = [&](const std::string& key, const std::string& what) {
    throw ConfigError(fmt::format("{}: key '{}': {} with model.pipeline is not in this version",
                                  config.locate(key), key, what));
  };
  if (compile_only) return;  // plans and estimates cover all of it
  if (config.batch.replicas > 1 || config.collective.engine == "mpi")
    refuse("batch.replicas", "running several replicas");
}

}  // namespace

void run_pipelined_pretraining(Device& device, const std::vector<Device*>& stage_devices,
                               const RunConfig& config, bool compile_only,
                               const PretrainObserver& observer, const PretrainingData& data,
                               const std::set<std::int64_t>& recompute, PretrainResult& result) {
  refuse_unsupported(config, compile_only);
  const auto count = static_cast<int>(result.stages.size());
  const BertShape shape{config.batch.micro, config.model.seq_len};
  // One device per stage when the backend has them (IPUs); else all on one.
  std::vector<Device*> devices(static_cast<std::size_t>(count), &device);
  if (stage_devices.size() >= devices.size())
    std::copy_n(stage_devices.begin(), devices.size(), devices.begin());
  const OptimizerSettings settings = optimizer_settings(config.optimizer);
  PipelinedTraining pipeline(
      devices, result.config, shape, settings, config.model.precision,
      DropoutSettings{config.model.dropout,
                      config.model.attention_dropout.value_or(config.model.dropout)},
      config.model.seed, data.max_predictions(), TaskHead{}, recompute, result.stages);
  const auto accumulation = static_cast<int>(config.batch.grad_accum);
  result.stage_memory = pipeline.plan_memory(accumulation);
  bool fits = true;
  std::size_t fullest = 0;
  for (std::size_t s = 0; s < result.stage_memory.size(); ++s) {
    fits = fits && result.stage_memory[s].fits;
    if (result.stage_memory[s].required_bytes > result.stage_memory[fullest].required_bytes)
      fullest = s;
  }
  result.memory = result.stage_memory[fullest];
  result.memory.fits = fits;
  // Each stage all-reduces its own gradients over the replicas, all stages
  // at once: the largest stage's all-reduce is the one waited for.
  const int replicas = static_cast<int>(config.batch.replicas);
  std::int64_t largest = 0;
  for (int s = 0; s < count; ++s) largest = std::max(largest, pipeline.stage_parameters(s));
  result.parameters = pipeline.parameter_count();
  result.estimated_all_reduce_seconds = estimate_gradient_all_reduce(device, largest, replicas);
  result.estimate = pipeline.estimate_step(
      accumulation, static_cast<std::int64_t>(replicas) * accumulation * config.batch.micro,
      result.estimated_all_reduce_seconds.value_or(0.0));
  if (compile_only) return;

  const CheckpointStore store(config.checkpoint.dir);
  LossScaler scaler = LossScaler::from_config(config.optimizer, config.model.precision);
  std::int64_t done = 0;
  std::optional<std::filesystem::path> latest;
  if (config.checkpoint.resume) latest = store.latest();
  if (latest) {
    const auto checkpoint = CheckpointStore::load(*latest);
    pipeline.load_state(checkpoint.state, checkpoint.step);
    scaler.restore(checkpoint.metadata);
    done = checkpoint.step;
    spdlog::info("resumed from {} at step {}", latest->string(), done);
  } else if (!config.checkpoint.init.empty() || !config.model.weights.empty()) {
    const auto& file =
        config.checkpoint.init.empty() ? config.model.weights : config.checkpoint.init;
    pipeline.load_weights(load_bert_weights(file, result.config));
  } else {
    pipeline.load_weights(init_bert_weights(result.config, config.model.seed));
  }
  result.first_step = done + 1;
  const auto save = [&](std::int64_t step) {
    if (!store.enabled()) return;
    auto metadata = scaler.metadata();
    metadata["model"] = result.model_name;
    metadata["writer"] = "polyhal pretrain";
    result.checkpoints.push_back(store.save(step, pipeline.state(), std::move(metadata)));
  };
  const auto micro_batches = static_cast<std::uint64_t>(accumulation);
  for (std::int64_t number = done + 1; number <= config.steps; ++number) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<TrainingBatch> batches;
    for (std::uint64_t m = 0; m < micro_batches; ++m)
      batches.push_back(data.batch(static_cast<std::uint64_t>(number - 1) * micro_batches + m));
    PretrainStep record;
    record.step = number;
    record.learning_rate = learning_rate_at(config.optimizer, number, config.steps);
    record.loss_scale = scaler.scale();
    const StepLosses losses = pipeline.forward_backward(batches, scaler.scale());
    record.mlm_loss = losses.mlm;
    record.nsp_loss = losses.nsp;
    const auto norm = pipeline.optimizer_step(record.learning_rate, scaler.scale());
    record.skipped = !norm.has_value();
    record.grad_norm = norm.value_or(0.0);
    scaler.update(record.skipped);
    record.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.steps.push_back(record);
    if (observer) observer(record, config.steps);
    if (number == config.steps ||
        (config.checkpoint.every > 0 && number % config.checkpoint.every == 0))
      save(number);
  }
}

}  // namespace polyhal
