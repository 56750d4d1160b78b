#include "polyhal/app/pretrain_task.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "plan/plan_fit.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/loss_scaler.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/error.hpp"
#include "pretrain_section.hpp"
#include "tasks/pretrain/pretrain_evaluation.hpp"
#include "tasks/training_run.hpp"
#include "tasks/training_setup.hpp"
#include "train/trainer.hpp"
#include "train/training_job.hpp"

namespace polyhal {

namespace {

/// The training data (or, planning a config for another machine, its
/// description): the data never labels more than max_predictions positions
/// per sequence, so the MLM head runs on those rows only.
std::unique_ptr<PretrainingData> pretraining_data(const RunConfig& config, const ModelPlan& card,
                                                  const BertConfig& model, bool compile_only) {
  const BertShape shape{config.batch.micro, card.seq_len};
  auto data = compile_only ? planned_pretraining_data(data_source(config), model, shape) : nullptr;
  if (data) {
    spdlog::warn("data: {}", data->description());
    return data;
  }
  data = open_pretraining_data(data_source(config), model, shape);
  spdlog::info("data: {}", data->description());
  return data;
}

/// The held-out data's evaluator, when the config has an `eval` section
/// (and, planning, its files are here).
std::unique_ptr<PretrainEvaluator> pretraining_evaluator(const TaskContext& context,
                                                         PretrainResult& result,
                                                         bool compile_only) {
  const auto& eval = context.config.section<EvalSection>();
  if (!eval.enabled()) return nullptr;
  std::error_code missing;
  if (compile_only && !eval.files.empty() && !std::filesystem::exists(eval.files, missing)) {
    spdlog::warn("evaluation data {} is not on this machine: the plan leaves it out",
                 eval.files.string());
    return nullptr;
  }
  auto evaluator = std::make_unique<PretrainEvaluator>(
      context.device, context.config, result.config, context.plan.precision.activations,
      context.plan.model.seq_len);
  result.eval_data = evaluator->description();
  spdlog::info("evaluation: {}", result.eval_data);
  return evaluator;
}

/// checkpoint.init, model.weights, or a seeded initialisation.
TensorMap pretraining_start(const RunConfig& config, const ModelPlan& card,
                            const BertConfig& model) {
  if (!config.checkpoint.init.empty())
    return read_located_start(config, "checkpoint.init", config.checkpoint.init, model, TaskHead{});
  if (!card.model_weights.empty()) return load_bert_weights(card.model_weights, model);
  return init_bert_weights(model, config.model.seed);
}

/// The job's plan, in the result.
void record_plan(const TrainingJob& job, PretrainResult& result) {
  const TrainingPlan& plan = job.plan();
  result.memory = plan.memory;
  result.unsharded_memory = job.unsharded_memory();
  result.stage_memory = plan.stage_memory;
  result.parameters = plan.parameters;
  result.estimated_all_reduce_seconds = plan.all_reduce;
  result.estimate = plan.estimate;
}

/// The evaluation's model beside training, in the plan: validate and
/// --compile-only say whether both fit, and run refuses what does not.
void add_evaluation_memory(Device& device, const PretrainEvaluator& evaluator,
                           PretrainResult& result) {
  auto items = result.memory.items;
  items.insert(items.end(), evaluator.memory_items().begin(), evaluator.memory_items().end());
  auto notes = result.memory.notes;
  result.memory = device.plan_memory(items);
  result.memory.notes.insert(result.memory.notes.begin(), notes.begin(), notes.end());
}

/// What the training call did, in the result.
void record_outcome(TrainingOutcome out, const TrainingJob& job, PretrainResult& result) {
  record_training_outcome(out, result);
  if (out.resumed) {
    result.resumed_checkpoint = out.resumed->checkpoint;
    result.resumed_loss = out.resumed->loss;
  }
  result.profile = job.profile();
  result.collective_engine =
      job.collective_engine_note(static_cast<std::int64_t>(result.steps.size()));
}

}  // namespace

PretrainResult run_pretraining(const TaskContext& context, bool compile_only,
                               const StepObserver& observer, const EvaluationObserver& on_eval,
                               StepTrace* trace) {
  const RunConfig& config = context.config;
  PretrainResult result;
  result.config = context.plan.model.dims;
  result.model_name = context.plan.model.name;
  check_training_setup(config, context.plan.precision, true);
  const auto data = pretraining_data(config, context.plan.model, result.config, compile_only);
  const auto evaluator = pretraining_evaluator(context, result, compile_only);
  TrainingJobOptions options =
      training_job_options(config, context.plan, result.config, TaskHead{}, data->max_predictions(),
                           data->packed_sequences(), compile_only);
  options.sequences_per_row = data->sequences_per_row();
  result.stages = options.stages;
  TrainingJob job(options, {&context.device, context.devices, context.world});
  record_plan(job, result);
  // A pipeline's plan is per stage; its evaluation is not in it.
  if (evaluator && options.stages.empty())
    add_evaluation_memory(context.device, *evaluator, result);
  if (trace) job.trace(*trace);
  if (compile_only) return result;
  require_plan_fits(result.memory);

  const std::int64_t samples_per_step = options.batch.global();
  const std::int64_t steps = result.total_steps = pretrain_steps(config, samples_per_step);
  if (config.section<SamplesSection>().samples > 0)
    spdlog::info("samples {}: {} steps of {} samples", config.section<SamplesSection>().samples,
                 steps, samples_per_step);
  TrainingRecipe recipe{
      .writer = "polyhal pretrain",
      .start_weights = [&] { return pretraining_start(config, context.plan.model, result.config); },
      .total_steps = steps,
      .schedule = config.optimizer,
      .metadata = {{"model", result.model_name}},
      .batches = [&data](std::uint64_t index) { return data->batch(index); }};
  recipe.loop = [&](Trainer& trainer, TrainingModel& model, Communicator& replicas,
                    std::int64_t done, TrainingLog& log) {
    std::unique_ptr<BertInference> eval_model;
    const auto evaluate = [&](std::int64_t step) {
      const TraceTrack::Scope traced(model.host_track(), "evaluation", "host", {{"step", step}});
      const PretrainEvaluation e =
          evaluator->evaluate(context.device, model.weights(), replicas, step, eval_model);
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
  };
  // The final weights as a Hugging Face directory (BertForPreTraining.from_pretrained),
  // in the plan's export_dir (checkpoint.dir/hf).
  recipe.write_export = [&](const std::filesystem::path& dir, const TensorMap& weights) {
    export_hf_directory(dir, result.config, TaskHead{}, weights);
  };
  record_outcome(run_training(recipe, job, context), job, result);
  return result;
}

}  // namespace polyhal
