#pragma once
// Evaluation during pre-training: the held-out data of config `eval`, run
// in eval mode (no dropout) through BertInference with the pre-training
// heads, scored as MLPerf scores it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/pretrain_task.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/collective.hpp"

namespace polyhal {

class PretrainEvaluator {
 public:
  /// Declares the evaluation's model on `device` (allocating nothing: its
  /// tensors are bounded as batch.micro's are, a ConfigError naming
  /// eval.micro, and its memory is planned), opens config.eval's data for
  /// `model` and reads every row of files it will evaluate, so that data
  /// of another sequence length or vocabulary fails here (in `validate`
  /// too), with a ConfigError naming the eval key and the file. Evaluates
  /// in `precision` (the plan's, as training computes), on sequences of
  /// `seq_len` tokens (the model card's).
  PretrainEvaluator(Device& device, const RunConfig& config, const BertConfig& model,
                    DType precision, std::int64_t seq_len);
  ~PretrainEvaluator();

  std::string description() const;
  /// What the evaluation's model holds on the device beside training
  /// (its activations, kernels and copy of the weights), named as such.
  const std::vector<MemoryItem>& memory_items() const { return memory_items_; }
  /// Whether optimizer step `step` (of `global_batch` samples) evaluates:
  /// every eval.every_steps, each time the samples trained pass a multiple
  /// of eval.every_samples, and at the run's `last` step.
  bool due(std::int64_t step, std::int64_t global_batch, bool last) const;
  /// Evaluates `weights` after `step`: this replica's share of the batches
  /// on `device` (`model` is made on first use and kept), summed over
  /// `replicas`; every replica returns the same.
  PretrainEvaluation evaluate(Device& device, const TensorMap& weights, Communicator& replicas,
                              std::int64_t step, std::unique_ptr<BertInference>& model) const;

 private:
  /// Declares the evaluation's model (bounded, its memory planned).
  void plan_model(Device& device, std::int64_t predictions);

  const RunConfig& config_;
  BertConfig model_;
  DType precision_;
  BertShape shape_;
  std::int64_t rows_ = 0;  ///< rows evaluated
  std::unique_ptr<PretrainingData> data_;
  std::vector<MemoryItem> memory_items_;
};

}  // namespace polyhal
