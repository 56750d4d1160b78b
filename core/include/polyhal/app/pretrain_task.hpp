#pragma once
/// @file pretrain_task.hpp
/// The `pretrain` task: BERT MLM + NSP pre-training with gradient
/// accumulation, a learning-rate schedule, progress, and checkpoints that a
/// crash cannot corrupt (see docs/pretraining.md).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/lr_schedule.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/app/training_step.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// One evaluation on the held-out data (config `eval`), over every replica.
/// Masked-LM accuracy as MLPerf defines it: correctly predicted masked
/// tokens / masked tokens, over the whole evaluation set.
struct PretrainEvaluation {
  std::int64_t step = 0;  ///< after this optimizer step
  std::int64_t sequences = 0;
  std::int64_t masked_tokens = 0;
  double mlm_accuracy = 0, nsp_accuracy = 0;
  double mlm_loss = 0;  ///< mean cross-entropy per masked token
  double nsp_loss = 0;  ///< mean cross-entropy per sequence
  double seconds = 0;
  bool reached_target = false;  ///< eval.stop_at reached: the run ends here
};

/// Called on rank 0 after every evaluation.
using EvaluationObserver = std::function<void(const PretrainEvaluation&)>;

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
  std::int64_t total_steps = 0;
  /// The checkpoint resumed from, and the loss its writer kept (a rerun of a
  /// finished run trains nothing and reports that loss).
  std::filesystem::path resumed_checkpoint;
  std::optional<double> resumed_loss;
  std::vector<TrainingStep> steps;
  std::vector<std::filesystem::path> checkpoints;
  std::filesystem::path exported;  ///< Hugging Face directory written at the end
  std::vector<OpTime> profile;     ///< host time per op kind over the run
  std::vector<PretrainEvaluation> evaluations;
  std::string eval_data;  ///< the held-out data, described (empty: no evaluation)
  /// The signal that stopped the run early (after a checkpoint); 0: none.
  int stopped_by_signal = 0;
  /// What the backend's collective engine did (TrainingJob::collective_engine_note).
  std::optional<std::string> collective_engine;
};

/// Runs (or with `compile_only`, prepares and plans) pre-training on
/// `context`'s device. Data parallelism: under mpirun (context.world) this
/// process is one replica among its ranks; otherwise the plan's replicas run
/// as threads of this process (collective: local). Replica r of N takes
/// micro-batches r, r+N, ... of the data stream; gradients and losses are
/// averaged over replicas before every optimizer step. Only rank 0 calls
/// `observer` and writes checkpoints. With pipeline stages, stage s runs on
/// context.devices[s] when there are enough of them (one per stage, as IPUs),
/// else every stage on the device. With an `eval` section, the held-out
/// data is evaluated (every replica takes its share, in eval mode) as
/// eval.every_* say and at the end, and eval.stop_at may end the run early
/// with a checkpoint. context.options.stop_signal stops it after a step.
PretrainResult run_pretraining(const TaskContext& context, bool compile_only,
                               const StepObserver& observer, const EvaluationObserver& on_eval = {},
                               StepTrace* trace = nullptr);

}  // namespace polyhal
