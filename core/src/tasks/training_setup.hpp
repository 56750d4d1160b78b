#pragma once
// From a run's config to a training job: the options every training task
// (pretrain, squad, glue) reads alike, each refused with its key when wrong.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"
#include "train/trainer.hpp"
#include "train/training_job.hpp"

namespace polyhal {

/// The encoder layers model.recompute names for `model`. Throws ConfigError
/// naming the key for a layer the model does not have.
std::set<std::int64_t> recompute_layers(const RunConfig& config, const BertConfig& model);

/// model.pipeline as stages of `model` (empty: not pipelined): the plan's
/// balanced stages, or the config's explicit list, which must name every
/// layer once, in order, contiguous. Throws ConfigError naming the key and
/// the numbers.
std::vector<PipelineStage> pipeline_stages(const RunConfig& config, const PlacementPlan& placement,
                                           const BertConfig& model);

/// The optimizer section as BertTraining takes it.
OptimizerSettings optimizer_settings(const OptimizerSection& optimizer);

/// The output paths, and when `trains` the plan's refusal of a precision
/// the device cannot train in (int8: an inference precision), naming the key.
void check_training_setup(const RunConfig& config, const PrecisionPlan& precision, bool trains);

/// The plan's batch with the replicas of the whole job (one per MPI rank under mpirun).
BatchShape batch_shape(const PlacementPlan& placement);

/// The job's options from the config and its plan: model, batch,
/// precision, dropout, seed, recomputation, pipeline stages and sharding,
/// with the task's `head`, `max_predictions` (pre-training's gathered MLM
/// rows, else 0) and `packed_sequences` (0: rows are not packed).
TrainingJobOptions training_job_options(const RunConfig& config, const RunPlan& plan,
                                        const BertConfig& model, const TaskHead& head,
                                        std::int64_t max_predictions, std::int64_t packed_sequences,
                                        bool compile_only);

/// The Trainer's schedule: `total_steps` under `schedule`'s learning rates
/// (optimizer.learning_rate_per_worker x `batch`'s replicas when given),
/// checkpoint.every / every_samples / start_after_samples with `batch`'s
/// global batch as the samples of a step, and `metadata` in every checkpoint;
/// gradients overlap backward as `placement` says.
TrainerSettings trainer_settings(const RunConfig& config, std::int64_t total_steps,
                                 const OptimizerSection& schedule,
                                 std::map<std::string, std::string> metadata, bool sharded,
                                 const PlacementPlan& placement);

}  // namespace polyhal
