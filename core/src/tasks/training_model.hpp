#pragma once
// What the Trainer trains: one program on one device (BertTraining), or a
// pipeline of stages (PipelinedTraining), behind one interface, so the
// training loop, its replicas, loss scaling and checkpoints are written once.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "polyhal/bert_training.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/pipelined_training.hpp"

namespace polyhal {

class TrainingModel {
 public:
  virtual ~TrainingModel() = default;
  /// Forward and backward of one optimizer step's `count` micro-batches
  /// (`batch(i)` gives micro-batch i), gradients accumulated, each scaled by
  /// 1/count and by `loss_scale`. Returns the mean losses.
  virtual StepLosses accumulate(const std::function<TrainingBatch(int)>& batch, int count,
                                double loss_scale) = 0;
  /// The replicas' mean of the accumulated gradients.
  virtual void all_reduce_gradients(Communicator& replicas) = 0;
  /// The update; the global gradient norm, or nullopt when it overflowed.
  virtual std::optional<double> optimizer_step(double learning_rate, double loss_scale) = 0;
  /// Checkpoint state (weights and optimizer state); a collective when sharded.
  virtual TensorMap state() const = 0;
  /// The weights under Hugging Face names.
  virtual TensorMap weights() const = 0;
};

/// `model` behind the interface; `model` must outlive the result.
std::unique_ptr<TrainingModel> training_model(BertTraining& model);
std::unique_ptr<TrainingModel> training_model(PipelinedTraining& model);

}  // namespace polyhal
