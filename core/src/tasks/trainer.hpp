#pragma once
// One replica's pre-training loop: micro-batches with gradient accumulation,
// the replicas' mean of losses and gradients, the optimizer step under the
// learning-rate schedule and loss scaling, and checkpoints.
#include <cstdint>
#include <string>

#include "polyhal/bert_training.hpp"
#include "polyhal/checkpoint_store.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/loss_scaler.hpp"
#include "polyhal/pretrain_task.hpp"
#include "polyhal/pretraining_data.hpp"

namespace polyhal {

class Trainer {
 public:
  /// `sharded`: the optimizer state is sharded, so saving is a collective.
  Trainer(BertTraining& model, Communicator& replicas, const RunConfig& config,
          const PretrainingData& data, const CheckpointStore& store, LossScaler scaler,
          std::string model_name, bool sharded)
      : model_(model),
        replicas_(replicas),
        config_(config),
        data_(data),
        store_(store),
        scaler_(std::move(scaler)),
        model_name_(std::move(model_name)),
        sharded_(sharded) {}

  /// Optimizer steps done + 1 .. config.steps. Replica r of N takes every
  /// N-th micro-batch of the stream, so N replicas see exactly what one
  /// replica with N x the accumulation would. Rank 0 (of every replica in
  /// every process) reports each step to `observer`, records it in `result`
  /// and writes the checkpoints.
  void run(std::int64_t done, const PretrainObserver& observer, PretrainResult& result);

 private:
  PretrainStep step(std::int64_t number);
  void save(std::int64_t step, PretrainResult& result);

  BertTraining& model_;
  Communicator& replicas_;
  const RunConfig& config_;
  const PretrainingData& data_;
  const CheckpointStore& store_;
  LossScaler scaler_;
  std::string model_name_;
  bool sharded_;
};

}  // namespace polyhal
