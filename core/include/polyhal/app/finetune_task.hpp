#pragma once
/// @file finetune_task.hpp
/// Tasks `squad` and `glue`: fine-tuning BERT with a question-answering or
/// classification head, evaluation after every epoch and prediction, on any
/// backend, with the pre-training loop's accumulation, replicas, mixed
/// precision, loss scaling and checkpoints (docs/finetuning.md).
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/pretrain_task.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// One evaluation (after an epoch, or alone) or prediction.
struct FinetuneEvaluation {
  std::string split;                         ///< "eval" or "predict"
  std::int64_t epoch = 0;                    ///< 0: before or without training
  std::int64_t step = 0;                     ///< optimizer steps done
  std::int64_t rows = 0;                     ///< model rows run (SQuAD features, GLUE examples)
  std::map<std::string, double> metrics;     ///< eval: exact/f1 or the GLUE task's
  std::vector<std::filesystem::path> files;  ///< predictions written
  double seconds = 0;                        ///< wall time on this host
};

struct FinetuneResult {
  BertConfig config;
  TaskHead head;
  MemoryReport memory;  ///< per replica: training's when it trains, else inference's
  std::int64_t parameters = 0;
  std::int64_t train_rows = 0, steps_per_epoch = 0, total_steps = 0, warmup_steps = 0;
  /// The signal that stopped training early (after a checkpoint); 0: none.
  int stopped_by_signal = 0;
  std::int64_t first_step = 1;  ///< > 1 when resumed from a checkpoint
  std::vector<TrainingStep> steps;
  std::vector<FinetuneEvaluation> evaluations;
  std::vector<std::filesystem::path> checkpoints;
  std::filesystem::path exported;  ///< the fine-tuned model as a Hugging Face directory
  /// Device models, when training: one optimizer step, by part (not measured).
  std::optional<TrainingStepEstimate> estimate;
  /// model.pipeline: the stages and each stage's plan (one device each);
  /// `memory` is then the fullest stage's.
  std::vector<PipelineStage> stages;
  std::vector<MemoryReport> stage_memory;
};

using FinetuneObserver = std::function<void(const FinetuneEvaluation&)>;

/// Runs (or with `compile_only`, plans without reading data) task squad or
/// glue. Training: finetune.epochs passes over the training rows in a
/// shuffled order keyed by (data.seed, epoch); every optimizer step takes
/// replicas x grad_accum x micro rows, and the rows that do not fill a last
/// step are left out of that epoch (as the reference's drop_remainder), a
/// different few each epoch. Weights start from checkpoint.init (a
/// pre-training checkpoint or a Hugging Face directory) or model.weights;
/// the head, when the file has none, is freshly initialised. Evaluation and
/// prediction split their rows over the replicas. Only rank 0 calls the
/// observers and writes files. With pipeline stages, training runs the
/// stages of replica r on context.devices[r x S + s] when there are that many
/// (else all on `device`), as pre-training does.
FinetuneResult run_finetuning(const TaskContext& context, bool compile_only,
                              const StepObserver& on_step, const FinetuneObserver& on_eval,
                              StepTrace* trace = nullptr);

}  // namespace polyhal
