#pragma once
/// @file training_step.hpp
/// What every training task (pre-training, pipelined or not, and
/// fine-tuning) reports of an optimizer step, and a device model's estimate
/// of one.
#include <cstdint>
#include <functional>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// One optimizer step as rank 0 saw it.
struct TrainingStep {
  std::int64_t step = 0;
  double mlm_loss = 0, nsp_loss = 0;  ///< pre-training's heads
  double task_loss = 0;               ///< fine-tuning: the head's loss
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

/// Called on rank 0 after every optimizer step (progress lines, metrics).
using StepObserver = std::function<void(const TrainingStep&, std::int64_t total_steps)>;

/// A device model's estimate of one optimizer step of the job (the
/// replicas run in parallel): not a measurement.
struct TrainingStepEstimate {
  double forward = 0, backward = 0;  ///< grad_accum micro-batches of one replica
  double optimizer = 0;              ///< updates and compute copies (the replica's share)
  double all_reduce = 0;             ///< the f32 gradients over the replicas, as the step waits
  /// The rest of the all-reduce, hidden behind the last micro-batch's
  /// backward (collective.overlap); not part of seconds().
  double all_reduce_hidden = 0;
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

}  // namespace polyhal
