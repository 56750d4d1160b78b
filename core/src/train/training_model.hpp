#pragma once
// What a training job trains: one program on one device (BertTraining), or a
// pipeline of stages (PipelinedTraining), behind one interface, so the
// training loop, its replicas, planning, loss scaling and checkpoints are
// written once.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/pipelined_training.hpp"
#include "polyhal/app/training_step.hpp"
#include "polyhal/collective.hpp"

namespace polyhal {

/// One replica's plan: nothing allocated.
struct TrainingPlan {
  MemoryReport memory;  ///< a pipeline's fullest stage; fits when every stage does
  /// Pipelining: each stage's plan (one device each), stashes included.
  std::vector<MemoryReport> stage_memory;
  std::int64_t parameters = 0;
  /// Device models with replicas > 1: the modelled time of one optimizer
  /// step's gradient all-reduce (a pipeline's largest stage); not measured.
  std::optional<double> all_reduce;
  /// Device models: one optimizer step of the job, by part.
  std::optional<TrainingStepEstimate> estimate;
};

/// The work of one optimizer step of the whole job, for the estimate.
struct StepWork {
  int accumulation = 1;  ///< micro-batches per replica
  int replicas = 1;      ///< over every process
  /// Sequences the step trains (replicas x accumulation x micro, more with
  /// packed rows).
  double sequences = 0;
  /// > 0: the gradient all-reduce runs in buckets of this many bytes during
  /// the last micro-batch's backward (collective.overlap).
  std::size_t overlap_bucket_bytes = 0;
};

class TrainingModel {
 public:
  virtual ~TrainingModel() = default;
  /// Forward and backward of one optimizer step's `count` micro-batches
  /// (`batch(i)` gives micro-batch i), gradients accumulated, each scaled by
  /// 1/count and by `loss_scale`. Returns the mean losses.
  virtual StepLosses accumulate(const std::function<TrainingBatch(int)>& batch, int count,
                                double loss_scale) = 0;
  /// The replicas' mean of the accumulated gradients (nothing left to do
  /// when accumulate() already reduced them during backward).
  virtual void all_reduce_gradients(Communicator& replicas) = 0;
  /// From now on, accumulate() reduces the gradients over `replicas` in
  /// buckets of `bucket_bytes` while the last micro-batch's backward runs
  /// (the whole model; a pipeline reduces after its schedule). `replicas`
  /// must outlive the model.
  virtual void overlap_gradient_all_reduce(Communicator& /*replicas*/,
                                           std::size_t /*bucket_bytes*/) {}
  /// The update; the global gradient norm, or nullopt when it overflowed.
  virtual std::optional<double> optimizer_step(double learning_rate, double loss_scale) = 0;
  /// Checkpoint state (weights and optimizer state); a collective when sharded.
  virtual TensorMap state() const = 0;
  /// The weights under Hugging Face names.
  virtual TensorMap weights() const = 0;
  /// Optimizer-state sharding over `replicas` (before any load).
  virtual void shard_optimizer_state(Communicator& replicas) = 0;
  virtual void load_weights(const TensorMap& weights) = 0;
  virtual void load_state(const TensorMap& state, std::int64_t steps) = 0;
  /// The plan of this replica (as sharded so far) for `work` on `device`
  /// (whose model prices the all-reduce).
  virtual TrainingPlan plan(Device& device, const StepWork& work) const = 0;
  /// The estimate alone, for other `work` (packed rows known after planning).
  virtual std::optional<TrainingStepEstimate> estimate(Device& device,
                                                       const StepWork& work) const = 0;
  /// Host time per op kind so far (empty for a pipeline).
  virtual std::vector<OpTime> profile() const = 0;

  /// Puts this replica's kernel runs on `lane`'s tracks while it records
  /// (--profile): "replica R" for the whole model, "replica R stage S" per
  /// pipeline stage. The lane must outlive the runs.
  virtual void attach_trace(TraceLane& lane) = 0;
  /// The lane attached, or nullptr.
  TraceLane* trace_lane() const noexcept { return lane_; }
  /// Where the training loop puts its host phases (data, all-reduce,
  /// optimizer, checkpoint, evaluation): the whole model's own track, a
  /// pipeline's "replica R host"; nullptr when not traced.
  TraceTrack* host_track() const noexcept { return host_track_; }
  /// A device model's estimated timeline of optimizer step `step` of
  /// `work` on `lane`, from `start_us`; returns where it ends (µs), or
  /// nullopt on real hardware.
  virtual std::optional<double> trace_estimated_step(TraceLane& lane, Device& device,
                                                     const StepWork& work, std::int64_t step,
                                                     double start_us) const = 0;

 protected:
  TraceLane* lane_ = nullptr;
  TraceTrack* host_track_ = nullptr;
};

/// The whole model on one device; owns `model`.
std::unique_ptr<TrainingModel> whole_model(std::unique_ptr<BertTraining> model);
/// A pipeline of stages; owns `model`.
std::unique_ptr<TrainingModel> pipelined_model(std::unique_ptr<PipelinedTraining> model);

/// The device model's time for one all-reduce of `parameters` f32
/// gradients (as polyhal all-reduces them) over `replicas`; nullopt for one
/// replica or real hardware.
std::optional<double> estimate_gradient_all_reduce(Device& device, std::int64_t parameters,
                                                   int replicas);

}  // namespace polyhal
