#include "polyhal/app/finetune_task.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "finetune_section.hpp"
#include "plan/plan_fit.hpp"
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/bert_weights.hpp"
#include "polyhal/app/checkpoint_store.hpp"
#include "polyhal/app/hf_directory.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/pretraining_data.hpp"
#include "polyhal/app/replica_group.hpp"
#include "polyhal/app/tf_checkpoint.hpp"
#include "polyhal/error.hpp"
#include "tasks/finetune/finetune_data.hpp"
#include "tasks/inference_precision.hpp"
#include "tasks/training_run.hpp"
#include "tasks/training_setup.hpp"
#include "train/trainer.hpp"
#include "train/training_job.hpp"
#include "util/directory_lock.hpp"

namespace polyhal {
namespace {

/// The model and start weights: the plan's (ModelPlan's rule, as every task).
using StartingPoint = ModelPlan;

/// The pre-trained encoder with the task's head, or a seeded random
/// initialisation (said to be a smoke test).
TensorMap starting_weights(const StartingPoint& start, const RunConfig& config,
                           const TaskHead& head) {
  if (start.weights.empty()) {
    spdlog::warn(
        "no checkpoint.init or model.weights: fine-tuning randomly initialised weights "
        "(seed {}); results mean nothing beyond a smoke test",
        config.model.seed);
    return init_bert_weights(start.dims, config.model.seed, head);
  }
  const std::string key = config.checkpoint.init.empty() ? "model.weights" : "checkpoint.init";
  return read_located_start(config, key, start.weights, start.dims, head);
}

/// The training row at stream position `position`: epochs of `per_epoch`
/// rows, each a shuffled order of the `rows` rows keyed by (seed, epoch), or
/// the file order every epoch without `shuffle`.
std::int64_t training_row(std::uint64_t position, std::int64_t per_epoch, std::int64_t rows,
                          std::uint64_t seed, bool shuffle) {
  const auto epoch = position / static_cast<std::uint64_t>(per_epoch);
  const auto offset = position % static_cast<std::uint64_t>(per_epoch);
  if (!shuffle) return static_cast<std::int64_t>(offset);
  return sample_at(epoch * static_cast<std::uint64_t>(rows) + offset, rows, seed, true);
}

/// The head's outputs for every row of `rows` (row-major, `width` each):
/// replica r runs batches r, r + N, ...; the sum over replicas fills them all.
std::vector<float> head_outputs(BertInference& model, const ModelRows& rows, std::int64_t width,
                                Communicator& replicas) {
  const std::int64_t batch = model.shape().batch, seq = model.shape().seq;
  const std::int64_t count = rows.count();
  const std::int64_t batches = (count + batch - 1) / batch;
  std::vector<float> out(static_cast<std::size_t>(count * width), 0.0f);
  const bool spans = model.head().kind == TaskHead::Kind::question_answering;
  BertOutputs outputs;
  const auto begin = std::chrono::steady_clock::now();
  std::int64_t done = 0;
  for (std::int64_t b = replicas.rank(); b < batches; b += replicas.size()) {
    const std::int64_t first = b * batch, real = std::min(batch, count - first);
    std::vector<std::int64_t> indices(static_cast<std::size_t>(batch));
    for (std::int64_t j = 0; j < batch; ++j)  // a short last batch repeats its last row
      indices[static_cast<std::size_t>(j)] = first + std::min(j, real - 1);
    model.run(rows.batch(indices).inputs, &outputs);
    for (std::int64_t j = 0; j < real; ++j) {
      float* row = out.data() + (first + j) * width;
      if (spans) {
        std::copy_n(outputs.start_logits.begin() + j * seq, seq, row);
        std::copy_n(outputs.end_logits.begin() + j * seq, seq, row + seq);
      } else {
        std::copy_n(outputs.logits.begin() + j * width, width, row);
      }
    }
    // SQuAD's dev set is minutes of work on a CPU: say how far it is.
    ++done;
    const std::int64_t mine = (batches - replicas.rank() + replicas.size() - 1) / replicas.size();
    if (replicas.rank() == 0 && mine >= 20 && done % (mine / 10) == 0) {
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      spdlog::info("evaluating: {}/{} batches, ETA {:.0f} s", done, mine,
                   elapsed / static_cast<double>(done) * static_cast<double>(mine - done));
    }
  }
  replicas.set_purpose("the evaluation's predictions");
  if (replicas.size() > 1) replicas.all_reduce(out.data(), out.size(), DType::f32, ReduceOp::sum);
  return out;
}

/// The vocabulary the data is tokenized with: required from here on.
const TokenizerSpec& required_tokenizer(const StartingPoint& start, const RunConfig& config) {
  if (start.vocab.empty()) {
    throw config.error(
        "data.vocab",
        fmt::format("required by task {}: the vocab.txt the model was pre-trained with",
                    config.task));
  }
  return start.tokenizer;
}

/// The training schedule from the data: epochs of whole global batches, the
/// warm-up as a share of the steps unless optimizer.warmup_steps is given.
/// Returns the optimizer section with that warm-up.
OptimizerSection plan_epochs(const RunConfig& config, const FinetuneData& data,
                             std::int64_t global_batch, FinetuneResult& result) {
  const FinetuneSection& f = config.section<FinetuneSection>();
  result.train_rows = data.rows(Split::train).count();
  if (result.train_rows < global_batch) {
    throw config.error("finetune.train_file",
                       fmt::format("{} training rows, fewer than one global batch of {} "
                                   "(replicas x grad_accum x micro)",
                                   result.train_rows, global_batch));
  }
  result.steps_per_epoch = result.train_rows / global_batch;
  // Fractional epochs take that share of an epoch's steps (as run_squad.py's
  // int(rows / batch x epochs), with polyhal's whole batches per epoch).
  result.total_steps = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(static_cast<double>(result.steps_per_epoch) * f.epochs));
  if (f.max_steps > 0 && f.max_steps < result.total_steps) {
    spdlog::info("finetune.max_steps: {} steps of the epochs' {}", f.max_steps, result.total_steps);
    result.total_steps = f.max_steps;
  }
  OptimizerSection schedule = config.optimizer;
  if (!config.sets("optimizer.warmup_steps"))
    schedule.warmup_steps =
        std::llround(f.warmup_proportion * static_cast<double>(result.total_steps));
  result.warmup_steps = schedule.warmup_steps;
  spdlog::info(
      "{} training rows: {:g} epochs of {} steps of {} rows ({} left out per epoch): {} steps, "
      "{} warm-up steps",
      result.train_rows, f.epochs, result.steps_per_epoch, global_batch,
      result.train_rows - result.steps_per_epoch * global_batch, result.total_steps,
      result.warmup_steps);
  return schedule;
}

/// Resume only from this task's own checkpoints of the same schedule.
ResumeCheck same_task_and_schedule(const RunConfig& config, const std::string& writer,
                                   std::int64_t total_steps) {
  return [&config, writer, total_steps](const CheckpointStore::Checkpoint& found) {
    const auto it = found.metadata.find("writer");
    const std::string found_writer = it == found.metadata.end() ? "unknown" : it->second;
    if (found_writer != writer) {
      throw config.error("checkpoint.dir",
                         fmt::format("{} holds checkpoints of '{}', not of this task: use "
                                     "another checkpoint.dir (checkpoint.init starts from them)",
                                     config.checkpoint.dir.string(), found_writer));
    }
    const auto steps = found.metadata.find("total_steps");
    if (steps == found.metadata.end() || steps->second != std::to_string(total_steps)) {
      throw config.error(
          "checkpoint.dir",
          fmt::format("{} was written for a schedule of {} steps, this config "
                      "makes {} (other data, batch or epochs): use another checkpoint.dir, or "
                      "checkpoint.resume: false",
                      found.path.string(),
                      steps == found.metadata.end() ? "unknown" : steps->second, total_steps));
    }
  };
}

/// Evaluates or predicts one split with the weights given, on every replica
/// (each runs its share of the rows); rank 0 scores and reports.
class Evaluator {
 public:
  Evaluator(const TaskContext& context, const FinetuneData& data, const FinetuneResult& result,
            const FinetuneObserver& on_eval, std::vector<FinetuneEvaluation>& evaluations)
      : context_(context),
        config_(context.config),
        data_(data),
        result_(result),
        on_eval_(on_eval),
        evaluations_(evaluations) {}

  /// One replica's part; `replicas` are the job's.
  void operator()(Split split, std::int64_t epoch, std::int64_t step, const TensorMap& weights,
                  Communicator& replicas, std::unique_ptr<BertInference>& model) const {
    const auto begin = std::chrono::steady_clock::now();
    if (!model) {
      model = make_inference(context_, result_);
      if (!config_.model.calibrate.empty()) model->start_calibration();
    }
    check_int8_weights(config_, context_.plan.precision, weights);
    model->load_weights(weights);
    const auto outputs = head_outputs(*model, data_.rows(split), data_.output_width(), replicas);
    if (replicas.rank() != 0) return;
    const auto& output_dir = config_.section<FinetuneSection>().output_dir;
    FinetuneEvaluation e;
    e.split = split == Split::eval ? "eval" : "predict";
    e.epoch = epoch;
    e.step = step;
    e.rows = data_.rows(split).count();
    auto report =
        data_.evaluate(split, outputs, output_dir.empty() ? output_dir : output_dir / e.split);
    e.metrics = std::move(report.metrics);
    e.files = std::move(report.files);
    e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    evaluations_.push_back(e);
    if (on_eval_) on_eval_(e);
  }

  static std::unique_ptr<BertInference> make_inference(const TaskContext& context,
                                                       const FinetuneResult& result) {
    Device& device = context.device;
    const RunConfig& config = context.config;
    const auto& f = config.section<FinetuneSection>();
    const BertShape shape{f.eval_batch > 0 ? f.eval_batch : config.batch.micro,
                          context.plan.model.seq_len};
    const InferencePrecision& precision = inference_precision(config, context.plan.precision);
    return refusing_precision(config, [&] {
      return std::make_unique<BertInference>(device, result.config, shape, precision, result.head,
                                             f.packed);
    });
  }

 private:
  const TaskContext& context_;
  const RunConfig& config_;
  const FinetuneData& data_;
  const FinetuneResult& result_;
  const FinetuneObserver& on_eval_;
  std::vector<FinetuneEvaluation>& evaluations_;
};

/// Evaluation and prediction without training, of the starting weights.
void evaluate_only(const TaskContext& context, const StartingPoint& start,
                   const FinetuneObserver& on_eval, FinetuneResult& result) {
  const RunConfig& config = context.config;
  Communicator* across_processes = context.world;
  const auto data =
      open_finetune_data(config, required_tokenizer(start, config), start.seq_len, result.head);
  const TensorMap weights = starting_weights(start, config, result.head);
  const Evaluator evaluate(context, *data, result, on_eval, result.evaluations);
  ReplicaGroup group(across_processes ? 1 : static_cast<int>(config.batch.replicas),
                     across_processes);
  const bool calibrate = !config.model.calibrate.empty();
  if (calibrate && (group.total() > 1 || across_processes != nullptr))
    throw config.error("model.calibrate",
                       "calibrate with one replica (batch.replicas 1, no mpirun)");
  group.run([&](int r) {
    std::unique_ptr<BertInference> model;
    Communicator& replicas = group.communicator(r);
    if (config.section<FinetuneSection>().eval)
      evaluate(Split::eval, 0, 0, weights, replicas, model);
    if (config.section<FinetuneSection>().predict)
      evaluate(Split::predict, 0, 0, weights, replicas, model);
    if (calibrate && model) write_calibration(config, context.plan.precision, *model, weights);
  });
}

/// Micro-batch `index` of the training stream: epochs of `per_epoch` rows,
/// each a shuffled order keyed by (data.seed, epoch), or the file order.
BatchSource training_batches(const RunConfig& config, const ModelRows& rows,
                             std::int64_t per_epoch) {
  return [&config, &rows, per_epoch](std::uint64_t index) {
    std::vector<std::int64_t> picked(static_cast<std::size_t>(config.batch.micro));
    for (std::size_t j = 0; j < picked.size(); ++j)
      picked[j] = training_row(index * picked.size() + j, per_epoch, rows.count(), config.data.seed,
                               config.data.shuffle);
    TrainingBatch batch = rows.batch(picked);
    batch.index = index;
    return batch;
  };
}

/// The checks fine-tuning makes before planning: precision, and packed
/// rows' 16-bit positions (the plan checked the sequence length).
void check_finetune_setup(const TaskContext& context, bool trains) {
  const RunConfig& config = context.config;
  check_training_setup(config, context.plan.precision, trains);
  if (config.section<FinetuneSection>().packed &&
      context.plan.model.seq_len > std::numeric_limits<std::uint16_t>::max())
    throw config.error("model.seq_len", fmt::format("packed rows hold at most {} tokens",
                                                    std::numeric_limits<std::uint16_t>::max()));
}

/// The job's plan, in the result.
void record_plan(const TrainingJob& job, FinetuneResult& result) {
  result.memory = job.plan().memory;
  result.stage_memory = job.plan().stage_memory;
  result.parameters = job.plan().parameters;
  result.estimate = job.plan().estimate;
}

/// One replica's training: epoch by epoch (the last one partial with
/// fractional epochs or max_steps), evaluating after each when asked and
/// predicting at the end; nothing more once a signal stopped it.
auto epochs_loop(const FinetuneResult& result, const FinetuneSection& f,
                 const StepObserver& on_step, const Evaluator& evaluate) {
  return [&result, &f, &on_step, &evaluate](Trainer& trainer, TrainingModel& training,
                                            Communicator& replicas, std::int64_t done,
                                            TrainingLog& log) {
    std::unique_ptr<BertInference> evaluator;
    const std::int64_t per_epoch = result.steps_per_epoch;
    const std::int64_t epochs = (result.total_steps + per_epoch - 1) / per_epoch;
    for (std::int64_t epoch = 1; epoch <= epochs; ++epoch) {
      const std::int64_t last = std::min(epoch * per_epoch, result.total_steps);
      const std::int64_t first = std::max(done + 1, (epoch - 1) * per_epoch + 1);
      if (first > last) continue;  // done before the resume
      trainer.run(first, last, on_step, log);
      if (trainer.stopped()) return;
      if (f.eval) {
        const TraceTrack::Scope traced(training.host_track(), "evaluation", "host",
                                       {{"epoch", epoch}});
        evaluate(Split::eval, epoch, last, training.weights(), replicas, evaluator);
      }
    }
    if (f.predict)
      evaluate(Split::predict, epochs, result.total_steps, training.weights(), replicas, evaluator);
  };
}

/// What the training call did, in the result.
void record_outcome(TrainingOutcome out, const TrainingJob& job, FinetuneResult& result) {
  record_training_outcome(out, result);
  if (const auto note = job.collective_engine_note(static_cast<std::int64_t>(result.steps.size()));
      note && job.lead())
    spdlog::info("{}", *note);
}

}  // namespace

FinetuneResult run_finetuning(const TaskContext& context, bool compile_only,
                              const StepObserver& on_step, const FinetuneObserver& on_eval,
                              StepTrace* trace) {
  const RunConfig& config = context.config;
  FinetuneResult result;
  const FinetuneSection& f = config.section<FinetuneSection>();
  const StartingPoint& start = context.plan.model;
  result.config = start.dims;
  result.head = finetune_head(config, start.start_labels);
  check_finetune_setup(context, f.train);
  // Two fine-tunings on one output_dir would replace each other's
  // predictions and model: the second is refused, as on one checkpoint.dir.
  // (Training locks checkpoint.dir, which may be the same directory.)
  std::optional<detail::DirectoryLock> output_lock;
  std::error_code ec;
  const bool locked_as_checkpoints =
      f.train && !config.checkpoint.dir.empty() &&
      std::filesystem::weakly_canonical(f.output_dir, ec) ==
          std::filesystem::weakly_canonical(config.checkpoint.dir, ec);
  if (!compile_only && !f.output_dir.empty() && !locked_as_checkpoints &&
      (!context.world || context.world->rank() == 0))
    output_lock.emplace(f.output_dir, "finetune.output_dir");
  if (!f.train) {
    recompute_layers(config, result.config);  // the keys are checked as when training
    result.stages = pipeline_stages(config, context.plan.placement, result.config);
    result.memory = Evaluator::make_inference(context, result)->plan_memory();
    if (!compile_only) evaluate_only(context, start, on_eval, result);
    return result;
  }
  const TrainingJobOptions options =
      training_job_options(config, context.plan, result.config, result.head, 0,
                           f.packed ? f.max_sequences_per_pack : 0, compile_only);
  result.stages = options.stages;
  TrainingJob job(options, {&context.device, context.devices, context.world});
  record_plan(job, result);
  if (trace) job.trace(*trace);
  if (compile_only) return result;
  require_plan_fits(result.memory);

  const auto data =
      open_finetune_data(config, required_tokenizer(start, config), start.seq_len, result.head);
  const std::int64_t global_batch = options.batch.global();
  const OptimizerSection schedule = plan_epochs(config, *data, global_batch, result);
  const ModelRows& train_rows = data->rows(Split::train);
  if (f.packed) {
    // Packed rows: a row costs about what an unpacked one does and holds more sequences.
    job.set_sequences_per_row(static_cast<double>(train_rows.sequence_count()) /
                              static_cast<double>(train_rows.count()));
    result.estimate = job.plan().estimate;
  }
  TrainingRecipe recipe{
      .writer = "polyhal " + config.task,
      .start_weights = [&] { return starting_weights(start, config, result.head); },
      .total_steps = result.total_steps,
      .schedule = schedule,
      .metadata = {{"model", hf_architecture(result.head)},
                   {"total_steps", std::to_string(result.total_steps)}},
      .batches = training_batches(config, train_rows, result.steps_per_epoch * global_batch)};
  recipe.resume_check = same_task_and_schedule(config, recipe.writer, result.total_steps);
  const Evaluator evaluate(context, *data, result, on_eval, result.evaluations);
  recipe.loop = epochs_loop(result, f, on_step, evaluate);
  recipe.write_export = [&](const std::filesystem::path& dir, const TensorMap& weights) {
    export_hf_directory(dir, result.config, result.head, weights, start.vocab,
                        start.tokenizer.options.lower_case);
  };
  record_outcome(run_training(recipe, job, context), job, result);
  return result;
}

}  // namespace polyhal
