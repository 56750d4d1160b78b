#pragma once
// One replica's training loop, for pre-training and fine-tuning alike:
// micro-batches with gradient accumulation, the replicas' mean of losses and
// gradients, the optimizer step under the learning-rate schedule and loss
// scaling, and checkpoints.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "polyhal/bert_training.hpp"
#include "polyhal/checkpoint_store.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/loss_scaler.hpp"
#include "polyhal/pretrain_task.hpp"
#include "tasks/training_model.hpp"

namespace polyhal {

/// Micro-batch number `index` of the training stream; called from several
/// replica threads at once.
using BatchSource = std::function<TrainingBatch(std::uint64_t index)>;

/// The encoder layers model.recompute names for `model`. Throws ConfigError
/// naming the key for a layer the model does not have.
std::set<std::int64_t> recompute_layers(const RunConfig& config, const BertConfig& model);

/// model.pipeline as stages of `model` (empty: not pipelined). Explicit
/// stages must list every layer once, in order, contiguous. Throws
/// ConfigError naming the key and the numbers.
std::vector<PipelineStage> pipeline_stages(const RunConfig& config, const BertConfig& model);

/// The optimizer section as BertTraining takes it.
OptimizerSettings optimizer_settings(const OptimizerSection& optimizer);

/// Refuses, naming the key, a precision the device cannot train in and a
/// batch.replicas that disagrees with the number of MPI ranks.
void check_training_setup(Device& device, const RunConfig& config,
                          const Communicator* across_processes);

/// The device model's time for one all-reduce of `parameters` f32
/// gradients (as polyhal all-reduces them) over `replicas`; nullopt for one
/// replica or real hardware.
std::optional<double> estimate_gradient_all_reduce(Device& device, std::int64_t parameters,
                                                   int replicas);

/// One optimizer step of `model` with `grad_accum` micro-batches, its
/// gradient all-reduce and `sequences` sequences (the global batch, more
/// with packed rows), priced by the device
/// model; nullopt on real hardware.
std::optional<TrainingStepEstimate> estimate_training_step(const BertTraining& model,
                                                           std::int64_t grad_accum,
                                                           double sequences,
                                                           std::optional<double> all_reduce);

/// What rank 0 records while training.
struct TrainingLog {
  std::vector<PretrainStep> steps;
  std::vector<std::filesystem::path> checkpoints;
};

class Trainer {
 public:
  /// `config.steps` is the schedule's total, `config.optimizer` its shape.
  /// `sharded`: the optimizer state is sharded, so saving is a collective.
  /// `metadata` goes into every checkpoint (model, writer).
  Trainer(TrainingModel& model, Communicator& replicas, const RunConfig& config,
          BatchSource batches, const CheckpointStore& store, LossScaler& scaler,
          std::map<std::string, std::string> metadata, bool sharded)
      : model_(model),
        replicas_(replicas),
        config_(config),
        batches_(std::move(batches)),
        store_(store),
        scaler_(scaler),
        metadata_(std::move(metadata)),
        sharded_(sharded) {}

  /// Optimizer steps `first` .. `last`. Replica r of N takes every N-th
  /// micro-batch of the stream, so N replicas see exactly what one replica
  /// with N x the accumulation would. Rank 0 (of every replica in every
  /// process) reports each step to `observer`, records it in `log` and
  /// writes the checkpoints: every checkpoint.every steps, and at `last`.
  void run(std::int64_t first, std::int64_t last, const PretrainObserver& observer,
           TrainingLog& log);

 private:
  PretrainStep step(std::int64_t number);
  void save(std::int64_t step, TrainingLog& log);

  TrainingModel& model_;
  Communicator& replicas_;
  const RunConfig& config_;
  BatchSource batches_;
  const CheckpointStore& store_;
  LossScaler& scaler_;
  std::map<std::string, std::string> metadata_;
  bool sharded_;
};

}  // namespace polyhal
