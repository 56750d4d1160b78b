#include "polyhal/app/pretrain_task.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "pretrain_section.hpp"
#include "tasks/pretrain/pretrain_evaluation.hpp"
#include "tasks/sequence_fit.hpp"
#include "tasks/training_run.hpp"
#include "tasks/training_setup.hpp"
#include "train/trainer.hpp"
#include "train/training_job.hpp"

namespace polyhal {

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir) {
  return CheckpointStore(dir).latest();
}

PretrainResult run_pretraining(const TaskContext& context, bool compile_only,
                               const StepObserver& observer, const EvaluationObserver& on_eval,
                               StepTrace* trace) {
  Device& device = context.device;
  const RunConfig& config = context.config;
  PretrainResult result;
  result.config = resolve_bert_config(config.model, model_origin(config));
  check_sequence_fits(config, result.config);
  result.model_name =
      config.model.hf_config.empty() && config.model.dims.empty() ? config.model.preset : "custom";
  check_training_setup(device, config, context.plan.precision, true);
  // The data never labels more than max_predictions positions per sequence,
  // so the MLM head runs on those rows only.
  const BertShape shape{config.batch.micro, config.model.seq_len};
  auto data =
      compile_only ? planned_pretraining_data(data_source(config), result.config, shape) : nullptr;
  if (data) {
    spdlog::warn("data: {}", data->description());
  } else {
    data = open_pretraining_data(data_source(config), result.config, shape);
    spdlog::info("data: {}", data->description());
  }
  std::unique_ptr<PretrainEvaluator> evaluator;
  const auto& eval = config.section<EvalSection>();
  std::error_code missing;
  if (eval.enabled() && compile_only && !eval.files.empty() &&
      !std::filesystem::exists(eval.files, missing)) {
    spdlog::warn("evaluation data {} is not on this machine: the plan leaves it out",
                 eval.files.string());
  } else if (eval.enabled()) {
    evaluator = std::make_unique<PretrainEvaluator>(config, result.config,
                                                    context.plan.precision.activations);
    result.eval_data = evaluator->description();
    spdlog::info("evaluation: {}", result.eval_data);
  }
  TrainingJobOptions options =
      training_job_options(config, context.plan, result.config, TaskHead{}, data->max_predictions(),
                           data->packed_sequences(), compile_only);
  options.sequences_per_row = data->sequences_per_row();
  result.stages = options.stages;
  TrainingJob job(options, {&device, context.devices, context.world});
  const TrainingPlan& plan = job.plan();
  result.memory = plan.memory;
  result.unsharded_memory = job.unsharded_memory();
  result.stage_memory = plan.stage_memory;
  result.parameters = plan.parameters;
  result.estimated_all_reduce_seconds = plan.all_reduce;
  result.estimate = plan.estimate;
  if (trace) job.trace(*trace);
  if (compile_only) return result;

  const CheckpointStore store(config.checkpoint.dir);
  LossScaler scaler = context.plan.precision.loss_scaler;
  const std::int64_t done = job.start(
      store, config.checkpoint.resume,
      [&] {
        if (!config.checkpoint.init.empty())
          return read_located_start(config, "checkpoint.init", config.checkpoint.init,
                                    result.config, TaskHead{});
        if (!config.model.weights.empty())
          return load_bert_weights(config.model.weights, result.config);
        return init_bert_weights(result.config, config.model.seed);
      },
      scaler);
  result.first_step = done + 1;
  const std::int64_t samples_per_step = options.batch.global();
  const std::int64_t steps = pretrain_steps(config, samples_per_step);
  result.total_steps = steps;
  if (const auto& from = job.resumed(); from && job.lead()) {
    result.resumed_checkpoint = from->checkpoint;
    result.resumed_loss = from->loss;
  }
  print_resume(job, done, steps, config.checkpoint.dir);
  if (config.section<SamplesSection>().samples > 0)
    spdlog::info("samples {}: {} steps of {} samples", config.section<SamplesSection>().samples,
                 steps, samples_per_step);
  TrainerSettings settings =
      trainer_settings(config, steps, config.optimizer,
                       {{"model", result.model_name}, {"writer", "polyhal pretrain"}},
                       job.sharded(), context.plan.placement);
  settings.stop_signal = context.options.stop_signal;
  TrainingLog log;
  job.run([&](TrainingModel& model, Communicator& replicas) {
    LossScaler replica_scaler = scaler;
    Trainer trainer(
        model, replicas, settings, [&data](std::uint64_t index) { return data->batch(index); },
        store, replica_scaler);
    std::unique_ptr<BertInference> eval_model;
    const auto evaluate = [&](std::int64_t step) {
      const TraceTrack::Scope traced(model.host_track(), "evaluation", "host", {{"step", step}});
      const PretrainEvaluation e =
          evaluator->evaluate(device, model.weights(), replicas, step, eval_model);
      if (replicas.rank() == 0) {
        result.evaluations.push_back(e);
        if (on_eval) on_eval(e);
      }
      return e.reached_target;
    };
    // steps 0 evaluates the starting weights; a resumed run that had
    // reached its target ends at once, as it did.
    if (evaluator && (steps == 0 || (done > 0 && config.section<EvalSection>().stop_at > 0)) &&
        (evaluate(done) || steps == 0))
      return;
    if (steps > done)
      trainer.run(done + 1, steps, observer, log, [&](std::int64_t step, bool last) {
        return evaluator && evaluator->due(step, samples_per_step, last) && evaluate(step);
      });
  });
  result.steps = std::move(log.steps);
  result.checkpoints = std::move(log.checkpoints);
  result.stopped_by_signal = log.stopped_by_signal;
  result.profile = job.profile();
  result.collective_engine =
      job.collective_engine_note(static_cast<std::int64_t>(result.steps.size()));
  // The final weights as a Hugging Face directory
  // (BertForPreTraining.from_pretrained), written by rank 0 with the
  // checkpoints; also by a rerun of a finished run that stopped before its
  // export was whole (its last checkpoint holds the final weights).
  const auto hf =
      config.checkpoint.dir.empty() ? std::filesystem::path() : config.checkpoint.dir / "hf";
  if (export_due(job, hf, done, steps, result.stopped_by_signal)) {
    result.exported = hf;
    export_hf_directory(result.exported, result.config, TaskHead{}, job.weights());
  }
  return result;
}

}  // namespace polyhal
