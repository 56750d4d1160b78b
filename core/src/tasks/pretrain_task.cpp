#include "polyhal/pretrain_task.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "polyhal/bert_weights.hpp"
#include "polyhal/checkpoint_store.hpp"
#include "polyhal/error.hpp"
#include "polyhal/inference_task.hpp"
#include "polyhal/loss_scaler.hpp"
#include "polyhal/pretraining_data.hpp"
#include "polyhal/replica_group.hpp"
#include "tasks/pipelined_pretraining.hpp"
#include "tasks/trainer.hpp"

namespace polyhal {
namespace {

/// Weights to start from (phase 2 from phase 1): a checkpoint or a weights
/// file; optimizer state is dropped and a shorter position table is extended
/// with freshly initialised rows.
TensorMap initial_weights(const std::filesystem::path& file, const BertConfig& config,
                          std::uint64_t seed) {
  TensorMap weights = canonical_bert_weights(read_safetensors(file));
  const std::string position = "bert.embeddings.position_embeddings.weight";
  // Only a table of the model's width is extended (a file of another width
  // is refused by the loader below, never copied into a buffer it overflows).
  if (auto it = weights.find(position);
      it != weights.end() && it->second.shape.size() == 2 &&
      it->second.shape[1] == config.hidden_size &&
      it->second.shape[0] < config.max_position_embeddings &&
      it->second.values.size() ==
          static_cast<std::size_t>(it->second.shape[0] * it->second.shape[1])) {
    const auto fresh = init_bert_weights(config, seed).at(position);
    const std::int64_t rows = it->second.shape[0], h = it->second.shape[1];
    std::vector<float> extended = fresh.values;
    std::copy(it->second.values.begin(), it->second.values.end(), extended.begin());
    spdlog::info("extended position embeddings from {} to {} rows", rows,
                 config.max_position_embeddings);
    it->second = {{config.max_position_embeddings, h}, std::move(extended)};
  }
  // The normal loader's check, in memory (never through a file of ours).
  try {
    check_bert_weights(weights, file, config);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("checkpoint.init: {}", e.what()));
  }
  return weights;
}

/// Loads the state every replica starts from: the newest checkpoint when
/// resuming, else checkpoint.init, model.weights or a seeded initialisation.
/// Returns the optimizer steps already done.
std::int64_t load_start(BertTraining& training, const RunConfig& config, const BertConfig& model,
                        const std::optional<CheckpointStore::Checkpoint>& resume) {
  if (resume) {
    training.load_state(resume->state, resume->step);
    return resume->step;
  }
  if (!config.checkpoint.init.empty()) {
    training.load_weights(initial_weights(config.checkpoint.init, model, config.model.seed));
  } else if (!config.model.weights.empty()) {
    training.load_weights(load_bert_weights(config.model.weights, model));
  } else {
    training.load_weights(init_bert_weights(model, config.model.seed));
  }
  return 0;
}

/// The final weights as a Hugging Face directory
/// (BertForPreTraining.from_pretrained), written by rank 0 when checkpoints are.
void export_pretrained(const TensorMap& weights, const RunConfig& config,
                       const Communicator* across_processes, PretrainResult& result) {
  const bool lead = !across_processes || across_processes->rank() == 0;
  if (!lead || config.checkpoint.dir.empty()) return;
  result.exported = config.checkpoint.dir / "hf";
  std::filesystem::create_directories(result.exported);
  write_hf_config(result.config, result.exported / "config.json");
  save_bert_weights(weights, DType::f32, result.exported / "model.safetensors");
}

}  // namespace

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  return CheckpointStore(dir).latest();
}

PretrainResult run_pretraining(Device& device, const RunConfig& config, bool compile_only,
                               const PretrainObserver& observer, Communicator* across_processes,
                               const std::vector<Device*>& stage_devices) {
  PretrainResult result;
  result.config = resolve_bert_config(config.model);
  result.model_name =
      config.model.hf_config.empty() && config.model.dims.empty() ? config.model.preset : "custom";
  const DType precision = config.model.precision;
  check_training_setup(device, config, across_processes);
  const BertShape shape{config.batch.micro, config.model.seq_len};
  const OptimizerSettings settings = optimizer_settings(config.optimizer);
  // The data never labels more than max_predictions positions per sequence,
  // so the MLM head runs on those rows only.
  const auto data = open_pretraining_data(config, result.config, shape);
  spdlog::info("data: {}", data->description());
  const auto recompute = recompute_layers(config, result.config);
  result.stages = pipeline_stages(config, result.config);
  if (!result.stages.empty()) {
    const TensorMap trained =
        run_pipelined_pretraining(device, stage_devices, config, compile_only, observer, *data,
                                  recompute, across_processes, result);
    if (!trained.empty()) export_pretrained(trained, config, across_processes, result);
    return result;
  }
  const auto make_replica = [&] {
    return std::make_unique<BertTraining>(
        device, result.config, shape, settings, precision,
        DropoutSettings{config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)},
        config.model.seed, data->max_predictions(), TaskHead{}, recompute, PipelineStage{},
        data->packed_sequences());
  };
  const int local_replicas = across_processes ? 1 : static_cast<int>(config.batch.replicas);
  const int total_replicas = across_processes ? across_processes->size() : local_replicas;
  const bool sharded = config.optimizer.shard_state && total_replicas > 1;
  if (config.optimizer.shard_state && total_replicas == 1)
    spdlog::warn("optimizer.shard_state: one replica, nothing to shard");

  // Plan: one replica's program, nothing allocated.
  auto first = make_replica();
  result.memory = first->plan_memory();
  result.parameters = first->parameter_count();
  result.estimated_all_reduce_seconds =
      estimate_gradient_all_reduce(device, result.parameters, total_replicas);
  const std::int64_t global_batch =
      static_cast<std::int64_t>(total_replicas) * config.batch.grad_accum * config.batch.micro;
  const auto estimate = [&](const BertTraining& replica) {
    // Packed rows: a row costs what an unpacked one does and holds more sequences.
    result.estimate =
        estimate_training_step(replica, config.batch.grad_accum,
                               static_cast<double>(global_batch) * data->sequences_per_row(),
                               result.estimated_all_reduce_seconds);
  };
  if (compile_only) {
    if (sharded) {
      // The report of one replica's shard: planned with a stand-in group of
      // the run's size (no collective runs at compile time).
      result.unsharded_memory = result.memory;
      InProcessGroup plan_group(total_replicas);
      const auto rank0 = plan_group.communicator(0);
      first->shard_optimizer_state(*rank0);
      result.memory = first->plan_memory();
    }
    estimate(*first);
    return result;
  }

  ReplicaGroup group(local_replicas, across_processes);
  std::vector<std::unique_ptr<BertTraining>> replicas;
  replicas.push_back(std::move(first));
  for (int r = 1; r < local_replicas; ++r) replicas.push_back(make_replica());
  if (sharded) {
    result.unsharded_memory = result.memory;
    for (int r = 0; r < local_replicas; ++r)
      replicas[static_cast<std::size_t>(r)]->shard_optimizer_state(group.communicator(r));
    result.memory = replicas.front()->plan_memory();
  }
  estimate(*replicas.front());

  const CheckpointStore store(config.checkpoint.dir);
  std::optional<CheckpointStore::Checkpoint> resume;
  if (config.checkpoint.resume) {
    if (const auto latest = store.latest()) resume = CheckpointStore::load(*latest);
  }
  std::int64_t done = 0;
  for (auto& training : replicas)  // every replica starts from the same state
    done = load_start(*training, config, result.config, resume);
  if (resume) spdlog::info("resumed from {} at step {}", resume->path.string(), done);
  result.first_step = done + 1;
  LossScaler scaler = LossScaler::from_config(config.optimizer, precision);
  if (resume) scaler.restore(resume->metadata);
  resume.reset();  // the state is loaded: free the host copy

  TrainingLog log;
  group.run([&](int r) {
    LossScaler replica_scaler = scaler;
    const auto model = training_model(*replicas[static_cast<std::size_t>(r)]);
    Trainer trainer(
        *model, group.communicator(r), config,
        [&data](std::uint64_t index) { return data->batch(index); }, store, replica_scaler,
        {{"model", result.model_name}, {"writer", "polyhal pretrain"}}, sharded);
    if (config.steps > done) trainer.run(done + 1, config.steps, observer, log);
  });
  result.steps = std::move(log.steps);
  result.checkpoints = std::move(log.checkpoints);
  result.profile = replicas.front()->profile();
  if (config.steps > done)
    export_pretrained(replicas.front()->weights(), config, across_processes, result);
  return result;
}

}  // namespace polyhal
