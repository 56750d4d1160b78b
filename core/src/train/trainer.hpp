#pragma once
// One replica's training loop, for pre-training and fine-tuning alike:
// micro-batches with gradient accumulation, the replicas' mean of losses and
// gradients, the optimizer step under the learning-rate schedule and loss
// scaling, and checkpoints.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/training_step.hpp"
#include "polyhal/collective.hpp"
#include "train/training_model.hpp"

namespace polyhal {

/// Micro-batch number `index` of the training stream; called from several
/// replica threads at once.
using BatchSource = std::function<TrainingBatch(std::uint64_t index)>;

/// What rank 0 records while training.
struct TrainingLog {
  std::vector<TrainingStep> steps;
  std::vector<std::filesystem::path> checkpoints;
  /// The signal (SIGINT, SIGTERM) that stopped the run early; 0: none.
  int stopped_by_signal = 0;
};

/// Whether the samples trained pass a multiple of `every` at step `step`
/// (1-based) of `samples_per_step` each; false for `every` <= 0. Exact for
/// any step count and batch (128-bit products).
bool passes_multiple(std::int64_t step, std::int64_t samples_per_step, std::int64_t every);
/// Whether `step` steps of `samples_per_step` have trained `samples`.
bool samples_reached(std::int64_t step, std::int64_t samples_per_step, std::int64_t samples);

/// Called by every replica after optimizer step `step` (`last`: the run's
/// last) and before its checkpoint: an evaluation, for one. Returns true to
/// end the run here (then the step is checkpointed); every replica must
/// return the same.
using AfterStep = std::function<bool(std::int64_t step, bool last)>;

/// The schedule a Trainer follows.
struct TrainerSettings {
  std::int64_t grad_accum = 1;
  std::int64_t micro_batch = 1;  ///< rows per micro-batch
  std::int64_t total_steps = 0;  ///< the schedule's length
  /// The learning rate of optimizer step n (1-based) of total_steps.
  std::function<double(std::int64_t step)> learning_rate;
  std::int64_t checkpoint_every = 0;  ///< 0: only at the end of a run()
  std::int64_t keep_last = 0;         ///< checkpoints kept in the store; 0: all
  std::int64_t samples_per_step = 0;  ///< the global batch
  /// Also a checkpoint each time the samples pass a multiple of this (0: off).
  std::int64_t checkpoint_every_samples = 0;
  /// No scheduled checkpoint before this many samples (the end still saves).
  std::int64_t checkpoint_start_samples = 0;
  /// Goes into every checkpoint (model, writer, ...).
  std::map<std::string, std::string> metadata;
  /// The optimizer state is sharded: saving is then a collective.
  bool sharded = false;
  /// > 0: gradients are all-reduced in buckets of this many bytes during the
  /// last micro-batch's backward (collective.overlap); 0: after backward.
  std::size_t overlap_bucket_bytes = 0;
  /// Stop (RuntimeFailure, exit 1) once the loss has not been finite for
  /// this many steps in a row: the run diverged. A loss scaler's skipped
  /// steps count too, so a scale that can never recover does not spin.
  std::int64_t stop_after_non_finite = 5;
  /// Set (to a signal's number) when the user asks the run to stop: after
  /// the step in flight every replica checkpoints it and run() returns.
  /// The replicas agree on it after each step (one all-reduce of a number).
  const std::atomic<int>* stop_signal = nullptr;
  /// Counted up while run() reads stop_signal (the launcher's StopSignals).
  std::atomic<int>* stop_listeners = nullptr;
};

class Trainer {
 public:
  Trainer(TrainingModel& model, Communicator& replicas, TrainerSettings settings,
          BatchSource batches, const CheckpointStore& store, LossScaler& scaler)
      : model_(model),
        replicas_(replicas),
        settings_(std::move(settings)),
        batches_(std::move(batches)),
        store_(store),
        scaler_(scaler) {
    if (settings_.overlap_bucket_bytes > 0)
      model_.overlap_gradient_all_reduce(replicas_, settings_.overlap_bucket_bytes);
  }

  /// Optimizer steps `first` .. `last`. Replica r of N takes every N-th
  /// micro-batch of the stream, so N replicas see exactly what one replica
  /// with N x the accumulation would. Rank 0 (of every replica in every
  /// process) reports each step to `observer`, records it in `log` and
  /// writes the checkpoints: every checkpoint_every steps, and at `last`.
  /// `after_step` may end the run early (then it checkpoints that step).
  void run(std::int64_t first, std::int64_t last, const StepObserver& observer, TrainingLog& log,
           const AfterStep& after_step = {});
  /// A signal stopped run() early (settings' stop_signal): run nothing more.
  bool stopped() const noexcept { return stopped_by_signal_ != 0; }

 private:
  TrainingStep step(std::int64_t number);
  /// The stop signal, agreed by every replica (0: none).
  int agreed_stop_signal();
  /// Whether step `number`'s schedule asks for a checkpoint (not the end's).
  bool checkpoint_due(std::int64_t number) const;
  /// `loss`: the step's, kept in the checkpoint's metadata for a rerun
  /// that finds nothing left to do.
  void save(std::int64_t step, TrainingLog& log, double loss);

  TrainingModel& model_;
  Communicator& replicas_;
  TrainerSettings settings_;
  BatchSource batches_;
  const CheckpointStore& store_;
  int stopped_by_signal_ = 0;
  LossScaler& scaler_;
};

}  // namespace polyhal
