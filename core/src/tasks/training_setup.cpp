#include "tasks/training_setup.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "polyhal/app/lr_schedule.hpp"
#include "polyhal/error.hpp"
#include "train/pipeline_balance.hpp"

namespace polyhal {

OptimizerSettings optimizer_settings(const OptimizerSection& o) {
  OptimizerSettings settings;
  settings.kind = o.name;
  settings.learning_rate = o.learning_rate;
  settings.beta1 = o.beta1;
  settings.beta2 = o.beta2;
  settings.epsilon = o.epsilon;
  settings.weight_decay = o.weight_decay;
  settings.momentum = o.momentum;
  settings.max_grad_norm = o.max_grad_norm;
  settings.first_moment = o.first_moment;
  return settings;
}

std::set<std::int64_t> recompute_layers(const RunConfig& config, const BertConfig& model) {
  std::set<std::int64_t> layers;
  if (config.model.recompute == "all") {
    for (std::int64_t l = 0; l < model.num_hidden_layers; ++l) layers.insert(l);
  }
  for (const std::int64_t layer : config.model.recompute_layers) {
    if (layer >= model.num_hidden_layers) {
      throw config.error("model.recompute",
                         fmt::format("layer {} does not exist: the model has {} layers (0-{})",
                                     layer, model.num_hidden_layers, model.num_hidden_layers - 1));
    }
    if (!layers.insert(layer).second) {
      throw config.error("model.recompute", fmt::format("layer {} is listed twice", layer));
    }
  }
  return layers;
}

std::vector<PipelineStage> pipeline_stages(const RunConfig& config, const PlacementPlan& placement,
                                           const BertConfig& model) {
  const auto& m = config.model;
  const std::int64_t layers = model.num_hidden_layers;
  const auto fail = [&](const std::string& problem) {
    throw config.error("model.pipeline", fmt::format("{}", problem));
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // [first, last) per stage
  if (placement.balanced_stages > 0) {
    const std::int64_t stages = placement.balanced_stages;
    if (stages > layers)
      fail(fmt::format("{} stages for {} layers: at most one stage per layer", stages, layers));
    // Balanced by compute and memory: the first stage also holds the
    // embeddings, the last the heads (in pre-training with the decoder's
    // copy of the word embeddings: BERT-large on 4 stages is 5, 7, 7, 5).
    const std::int64_t predictions =
        config.schema && config.schema->has(TaskTrait::reads_pretraining_data)
            ? std::max<std::int64_t>(1, config.data.max_predictions)
            : 0;
    const auto sizes = balance_pipeline(model, stages, m.seq_len, predictions);
    std::int64_t first = 0;
    for (const std::int64_t size : sizes) {
      ranges.emplace_back(first, first + size);
      first += size;
    }
  } else if (!m.pipeline.empty()) {
    std::int64_t expected = 0;
    for (std::size_t s = 0; s < m.pipeline.size(); ++s) {
      const auto& stage = m.pipeline[s];
      for (std::size_t i = 0; i < stage.size(); ++i) {
        if (stage[i] != expected) {
          fail(
              fmt::format("stage {} lists layer {} where layer {} comes next: stages must cover "
                          "layers 0-{} once each, in order",
                          s, stage[i], expected, layers - 1));
        }
        ++expected;
      }
      ranges.emplace_back(stage.front(), stage.back() + 1);
    }
    if (expected != layers)
      fail(fmt::format("the stages cover layers 0-{}, the model has {} (0-{})", expected - 1,
                       layers, layers - 1));
  } else {
    return {};
  }
  std::vector<PipelineStage> stages;
  for (std::size_t s = 0; s < ranges.size(); ++s) {
    stages.push_back({ranges[s].first, ranges[s].second, s == 0, s + 1 == ranges.size()});
  }
  return stages;
}

void check_training_setup(const RunConfig& config, const PrecisionPlan& plan, bool trains) {
  check_output_paths(config);
  // The plan decided it; evaluation alone (finetune.do: eval) computes as
  // inference does, where a CPU runs f16 as f16 products of f32 tensors.
  if (trains) refuse_untrainable_precision(config, plan);
}

BatchShape batch_shape(const PlacementPlan& placement) {
  return {placement.micro, placement.grad_accum, placement.replicas};
}

TrainingJobOptions training_job_options(const RunConfig& config, const RunPlan& plan,
                                        const BertConfig& model, const TaskHead& head,
                                        std::int64_t max_predictions, std::int64_t packed_sequences,
                                        bool compile_only) {
  TrainingJobOptions o;
  // A device model's links move data by DMA, as the vendors' stacks overlap
  // it: the estimate overlaps unless told not to.
  if (plan.placement.estimate_overlaps)
    o.overlap_bucket_bytes = static_cast<std::size_t>(config.collective.bucket_mb) << 20;
  o.model = model;
  o.seq_len = plan.model.seq_len;
  o.batch = batch_shape(plan.placement);
  o.training.optimizer = optimizer_settings(config.optimizer);
  o.training.precision = plan.precision.activations;
  if (plan.precision.linear_math == LinearMath::bf16_products) o.training.products = DType::bf16;
  o.training.dropout = {config.model.dropout,
                        config.model.attention_dropout.value_or(config.model.dropout)};
  o.training.seed = config.model.seed;
  o.training.max_predictions = max_predictions;
  o.training.head = head;
  o.training.recompute = recompute_layers(config, model);
  o.training.packed_sequences = packed_sequences;
  o.stages = pipeline_stages(config, plan.placement, model);
  o.shard_state = config.optimizer.shard_state;
  o.compile_only = compile_only;
  o.plugin_collectives = plan.placement.plugin_collectives;
  o.collective_timeout = std::chrono::milliseconds(
      static_cast<std::int64_t>(config.collective.timeout_seconds * 1000.0));
  return o;
}

OptimizerSection effective_rate(const RunConfig& config, OptimizerSection schedule, int replicas) {
  if (const auto per_worker = config.optimizer.learning_rate_per_worker) {
    schedule.learning_rate = *per_worker * replicas;
    spdlog::info(
        "optimizer.learning_rate_per_worker {:g} x {} replicas: learning rate {:g} (Habana's "
        "scripts multiply their --learning_rate by the workers alike)",
        *per_worker, replicas, schedule.learning_rate);
  }
  return schedule;
}

/// optimizer.*'s schedule keys as the trainer's schedule.
LearningRateSchedule learning_rate_schedule(const OptimizerSection& o) {
  return {o.learning_rate,     o.warmup_steps, o.schedule,    o.power,
          o.end_learning_rate, o.decay_rate,   o.decay_steps, o.step_list};
}

TrainerSettings trainer_settings(const RunConfig& config, std::int64_t total_steps,
                                 const OptimizerSection& schedule,
                                 std::map<std::string, std::string> metadata, bool sharded,
                                 const PlacementPlan& placement) {
  const BatchShape batch = batch_shape(placement);
  TrainerSettings s;
  s.grad_accum = placement.grad_accum;
  s.micro_batch = placement.micro;
  s.total_steps = total_steps;
  s.learning_rate =
      [rates = learning_rate_schedule(effective_rate(config, schedule, batch.replicas)),
       total_steps](std::int64_t step) { return learning_rate_at(rates, step, total_steps); };
  s.checkpoint_every = config.checkpoint.every;
  s.keep_last = config.checkpoint.keep_last;
  s.samples_per_step = batch.global();
  s.checkpoint_every_samples = config.checkpoint.every_samples;
  s.checkpoint_start_samples = config.checkpoint.start_after_samples;
  s.metadata = std::move(metadata);
  // A resumed run compares them with its own (TrainingJob::start).
  s.metadata["global_batch"] = std::to_string(batch.global());
  s.metadata["replicas"] = std::to_string(batch.replicas);
  s.sharded = sharded;
  if (placement.overlap_all_reduce)
    s.overlap_bucket_bytes = static_cast<std::size_t>(config.collective.bucket_mb) << 20;
  return s;
}

}  // namespace polyhal
