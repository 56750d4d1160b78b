#pragma once
/// @file pretrain_task.hpp
/// The `pretrain` task: BERT MLM + NSP pre-training with gradient
/// accumulation, a learning-rate schedule, progress, and checkpoints that a
/// crash cannot corrupt (see docs/pretraining.md).
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "polyhal/bert_config.hpp"
#include "polyhal/bert_training.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/config.hpp"
#include "polyhal/device.hpp"
#include "polyhal/lr_schedule.hpp"
#include "polyhal/pretraining_data.hpp"

namespace polyhal {

struct PretrainStep {
  std::int64_t step = 0;
  double mlm_loss = 0, nsp_loss = 0;
  double task_loss = 0;  ///< fine-tuning: the head's loss
  double learning_rate = 0;
  double grad_norm = 0;     ///< global gradient norm before clipping
  double loss_scale = 1.0;  ///< the scale this step ran with
  bool skipped = false;     ///< gradient overflow: weights unchanged
  double seconds = 0;       ///< wall time of the step on this host
  /// Sequences the step trained on, over all replicas: the global batch, or
  /// with packed rows the sequences they hold.
  std::int64_t sequences = 0;
  double loss() const { return mlm_loss + nsp_loss + task_loss; }
};

/// A device model's estimate of one optimizer step of the job (the
/// replicas run in parallel): not a measurement.
struct TrainingStepEstimate {
  double forward = 0, backward = 0;  ///< grad_accum micro-batches of one replica
  double optimizer = 0;              ///< updates and compute copies (the replica's share)
  double all_reduce = 0;             ///< the f32 gradients over the replicas
  /// Pipelining: filling and draining the pipeline, (stages - 1) micro-batches
  /// of the slowest stage (forward and backward above count that stage).
  double pipeline_ramp = 0;
  /// Each micro-batch's inputs from the host (not overlapped with compute:
  /// an upper bound; they are small next to the step).
  double host_io = 0;
  double sequences_per_second = 0;  ///< global batch / seconds()
  double seconds() const {
    return forward + backward + optimizer + all_reduce + pipeline_ramp + host_io;
  }
};

struct PretrainResult {
  std::string model_name;
  BertConfig config;
  MemoryReport memory;  ///< per replica (its shard, with optimizer.shard_state)
  /// With optimizer.shard_state: the same replica without sharding, to show the saving.
  std::optional<MemoryReport> unsharded_memory;
  /// Device models with replicas > 1: the modelled time of one optimizer
  /// step's gradient all-reduce on the device's own links (not measured).
  std::optional<double> estimated_all_reduce_seconds;
  /// Pipelining: each stage's plan (one device each), stashes included;
  /// `memory` is then the fullest stage's.
  std::vector<MemoryReport> stage_memory;
  std::vector<PipelineStage> stages;
  /// Device models: one optimizer step, by part.
  std::optional<TrainingStepEstimate> estimate;
  std::int64_t parameters = 0;
  std::int64_t first_step = 1;  ///< > 1 when resumed from a checkpoint
  std::vector<PretrainStep> steps;
  std::vector<std::filesystem::path> checkpoints;
  std::filesystem::path exported;  ///< Hugging Face directory written at the end
  std::vector<OpTime> profile;     ///< host time per op kind over the run
};

/// Called after every optimizer step (for progress lines and metrics).
using PretrainObserver = std::function<void(const PretrainStep&, std::int64_t total_steps)>;

/// Runs (or with `compile_only`, prepares and plans) pre-training.
/// Data parallelism: with `across_processes` (the MPI communicator), this
/// process is one replica among its ranks; without it, batch.replicas
/// replicas run as threads of this process on `device` (collective: local).
/// Replica r of N takes micro-batches r, r+N, ... of the data stream;
/// gradients and losses are averaged over replicas before every optimizer
/// step. Only rank 0 calls `observer` and writes checkpoints.
/// With model.pipeline, stage s runs on `stage_devices[s]` when there are
/// enough of them (one per stage, as IPUs), else every stage on `device`.
PretrainResult run_pretraining(Device& device, const RunConfig& config, bool compile_only,
                               const PretrainObserver& observer,
                               Communicator* across_processes = nullptr,
                               const std::vector<Device*>& stage_devices = {});

/// The newest complete checkpoint in `dir` (checkpoint-NNNNNNNN.safetensors), if any.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

}  // namespace polyhal
