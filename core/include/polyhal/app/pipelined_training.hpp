#pragma once
/// @file pipelined_training.hpp
/// Pipelined BERT training: the model split into stages (PipelineStage),
/// each a program on its own device (an IPU of the replica, or the CPU),
/// run through the 1F1B schedule with gradient accumulation as its depth,
/// as Graphcore's recipe does. Each stage keeps the values of its in-flight
/// micro-batches (a stash per micro-batch between its forward and
/// backward); the result equals the unpipelined step (tests).
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/training_step.hpp"

namespace polyhal {

/// One action of a pipeline schedule.
struct PipelineAction {
  int stage = 0;
  bool forward = true;
  int micro_batch = 0;
};

/// 1F1B (PipeDream-Flush): stage s runs min(S - s - 1, M) warm-up
/// forwards, then alternates a forward and a backward, then drains its
/// backwards. Returned in an order that respects the dependencies (a
/// micro-batch's forward at stage s after stage s-1's; its backward at s
/// after stage s+1's and after its own forward), stage by stage as the
/// ticks of a real pipeline would interleave them.
std::vector<PipelineAction> one_forward_one_backward(int stages, int micro_batches);
/// The most micro-batches a stage holds between forward and backward in
/// that schedule: min(S - s, M).
int in_flight(int stages, int stage, int micro_batches);

class PipelinedTraining {
 public:
  /// `stages` must cover every encoder layer once, in order; `devices` has
  /// one device per stage (the same device may appear more than once).
  /// `options` as BertTraining takes them; each stage recomputes the layers
  /// of options.recompute it holds.
  PipelinedTraining(const std::vector<Device*>& devices, const BertConfig& config,
                    BertShape micro_batch, const BertTrainingOptions& options,
                    const std::vector<PipelineStage>& stages);

  /// Per stage: its program's plan plus the stashes of the micro-batches in
  /// flight beyond the one its program holds.
  std::vector<MemoryReport> plan_memory(int micro_batches) const;
  void load_weights(const TensorMap& weights);
  /// One optimizer step's micro-batches through the schedule; gradients
  /// accumulate in every stage (the tied word embeddings summed over the two
  /// stages holding them). Returns the mean losses.
  StepLosses forward_backward(const std::vector<TrainingBatch>& micro_batches,
                              double loss_scale = 1.0);
  /// Every stage's optimizer step with the global gradient norm over all
  /// stages (the tied word embeddings counted once): clipped to
  /// max_grad_norm and unscaled by `loss_scale` alike, and skipped by every
  /// stage when a gradient overflowed (nullopt), as BertTraining::optimizer_step.
  std::optional<double> optimizer_step(double learning_rate, double loss_scale = 1.0);
  /// Data parallelism over pipelined replicas: each stage's gradients
  /// replaced by their mean over `replicas` (stage by stage, so every
  /// replica calls it with its stages in the same order).
  void all_reduce_gradients(Communicator& replicas);
  /// Each stage's optimizer state sharded over `replicas`
  /// (BertTraining::shard_optimizer_state); call before load_weights.
  void shard_optimizer_state(Communicator& replicas);
  /// Every stage's checkpoint state merged (stage_state names are disjoint
  /// but for the tied word embeddings, equal in both copies).
  TensorMap state() const;
  void load_state(const TensorMap& state, std::int64_t steps);
  /// Weights and gradients of all stages under Hugging Face names.
  TensorMap weights() const;
  TensorMap gradients() const;
  int stage_count() const { return static_cast<int>(stages_.size()); }
  const BertTraining& stage(int s) const { return *stages_.at(static_cast<std::size_t>(s)); }
  /// Each stage's kernel runs, stashes and micro-batch passes go on the
  /// lane's track "replica R stage S" while it records (--profile);
  /// nullptr stops. The lane must outlive the runs.
  void set_trace(TraceLane* lane);
  std::int64_t stage_parameters(int stage) const;
  /// Every stage's parameters (the tied word embeddings counted once).
  std::int64_t parameter_count() const;
  /// A device model's estimate of one optimizer step: `accumulation`
  /// micro-batches through the slowest stage, plus the ramp of S - 1
  /// micro-batches, the slowest stage's optimizer and `all_reduce`;
  /// nullopt on real hardware.
  /// `sequences`: what one step trains (rows, or packed rows' sequences).
  std::optional<TrainingStepEstimate> estimate_step(int accumulation, double sequences,
                                                    double all_reduce) const;

 private:
  std::vector<std::unique_ptr<BertTraining>> stages_;
  std::int64_t tied_elements_ = 0;   // the word embeddings' second copy
  std::vector<TraceTrack*> traces_;  // per stage, while traced
};

}  // namespace polyhal
