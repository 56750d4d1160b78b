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
#include "polyhal/replica_group.hpp"
#include "tasks/pipeline_plan.hpp"
#include "tasks/trainer.hpp"

namespace polyhal {

TensorMap run_pipelined_pretraining(Device& device, const std::vector<Device*>& stage_devices,
                                    const RunConfig& config, bool compile_only,
                                    const PretrainObserver& observer, const PretrainingData& data,
                                    const std::set<std::int64_t>& recompute,
                                    Communicator* across_processes, PretrainResult& result) {
  const auto count = static_cast<int>(result.stages.size());
  const BertShape shape{config.batch.micro, config.model.seq_len};
  const int local_replicas = across_processes ? 1 : static_cast<int>(config.batch.replicas);
  const int total_replicas = across_processes ? across_processes->size() : local_replicas;
  const int first_replica = across_processes ? across_processes->rank() : 0;
  const bool sharded = config.optimizer.shard_state && total_replicas > 1;
  const OptimizerSettings settings = optimizer_settings(config.optimizer);
  const auto make_pipeline = [&](int replica) {
    return std::make_unique<PipelinedTraining>(
        pipeline_devices(device, stage_devices, replica, count), result.config, shape, settings,
        config.model.precision,
        DropoutSettings{config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)},
        config.model.seed, data.max_predictions(), TaskHead{}, recompute, result.stages,
        data.packed_sequences());
  };
  // The replicas' communicators outlive the pipelines that hold them.
  std::unique_ptr<ReplicaGroup> group;
  if (!compile_only) group = std::make_unique<ReplicaGroup>(local_replicas, across_processes);
  // --compile-only plans one replica's shard with a stand-in group of the
  // run's size (no collective runs at compile time).
  std::unique_ptr<InProcessGroup> stand_in;
  std::unique_ptr<Communicator> stand_in_rank;
  std::vector<std::unique_ptr<PipelinedTraining>> pipelines;
  pipelines.push_back(make_pipeline(first_replica));
  PipelinedTraining& pipeline = *pipelines.front();
  if (sharded && group) {
    pipeline.shard_optimizer_state(group->communicator(0));
  } else if (sharded) {
    stand_in = std::make_unique<InProcessGroup>(total_replicas);
    stand_in_rank = stand_in->communicator(0);
    pipeline.shard_optimizer_state(*stand_in_rank);
  }
  const auto accumulation = static_cast<int>(config.batch.grad_accum);
  PipelinePlan plan = plan_pipeline(pipeline, device, accumulation, total_replicas,
                                    config.batch.micro, data.sequences_per_row());
  result.stage_memory = std::move(plan.stage_memory);
  result.memory = std::move(plan.memory);
  result.parameters = plan.parameters;
  result.estimated_all_reduce_seconds = plan.all_reduce;
  result.estimate = plan.estimate;
  if (compile_only) return {};

  for (int r = 1; r < local_replicas; ++r) {
    pipelines.push_back(make_pipeline(first_replica + r));
    if (sharded) pipelines.back()->shard_optimizer_state(group->communicator(r));
  }

  const CheckpointStore store(config.checkpoint.dir);
  LossScaler scaler = LossScaler::from_config(config.optimizer, config.model.precision);
  std::int64_t done = 0;
  std::optional<std::filesystem::path> latest;
  if (config.checkpoint.resume) latest = store.latest();
  if (latest) {
    const auto checkpoint = CheckpointStore::load(*latest);
    for (auto& p : pipelines) p->load_state(checkpoint.state, checkpoint.step);
    scaler.restore(checkpoint.metadata);
    done = checkpoint.step;
    spdlog::info("resumed from {} at step {}", latest->string(), done);
  } else {
    TensorMap weights;
    if (!config.checkpoint.init.empty() || !config.model.weights.empty()) {
      const auto& file =
          config.checkpoint.init.empty() ? config.model.weights : config.checkpoint.init;
      weights = load_bert_weights(file, result.config);
    } else {
      weights = init_bert_weights(result.config, config.model.seed);
    }
    for (auto& p : pipelines) p->load_weights(weights);
  }
  result.first_step = done + 1;
  TrainingLog log;
  group->run([&](int r) {
    const auto model = training_model(*pipelines[static_cast<std::size_t>(r)]);
    LossScaler replica_scaler = scaler;
    Trainer trainer(
        *model, group->communicator(r), config,
        [&data](std::uint64_t index) { return data.batch(index); }, store, replica_scaler,
        {{"model", result.model_name}, {"writer", "polyhal pretrain"}}, sharded);
    if (config.steps > done) trainer.run(done + 1, config.steps, observer, log);
  });
  result.steps = std::move(log.steps);
  result.checkpoints = std::move(log.checkpoints);
  return config.steps > done ? pipeline.weights() : TensorMap{};
}

}  // namespace polyhal
