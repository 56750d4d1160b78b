#include "tasks/trainer.hpp"

#include "tasks/pipeline_balance.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <limits>

#include "polyhal/error.hpp"

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
      throw ConfigError(fmt::format(
          "{}: key 'model.recompute': layer {} does not exist: the model has {} layers (0-{})",
          config.locate("model.recompute"), layer, model.num_hidden_layers,
          model.num_hidden_layers - 1));
    }
    if (!layers.insert(layer).second) {
      throw ConfigError(fmt::format("{}: key 'model.recompute': layer {} is listed twice",
                                    config.locate("model.recompute"), layer));
    }
  }
  return layers;
}

std::vector<PipelineStage> pipeline_stages(const RunConfig& config, const BertConfig& model) {
  const auto& m = config.model;
  const std::int64_t layers = model.num_hidden_layers;
  const auto fail = [&](const std::string& problem) {
    throw ConfigError(
        fmt::format("{}: key 'model.pipeline': {}", config.locate("model.pipeline"), problem));
  };
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;  // [first, last) per stage
  if (m.pipeline_stages > 0) {
    const std::int64_t stages = m.pipeline_stages;
    if (stages > layers)
      fail(fmt::format("{} stages for {} layers: at most one stage per layer", stages, layers));
    // Balanced by compute and memory: the first stage also holds the
    // embeddings, the last the heads (in pre-training with the decoder's
    // copy of the word embeddings: BERT-large on 4 stages is 5, 7, 7, 5).
    const std::int64_t predictions =
        config.task == "pretrain" ? std::max<std::int64_t>(1, config.data.max_predictions) : 0;
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

void check_training_setup(Device& device, const RunConfig& config,
                          const Communicator* across_processes) {
  check_output_paths(config);
  const DType precision = config.model.precision;
  if (!device.supports(precision)) {
    throw ConfigError(fmt::format(
        "{}: key 'model.precision': {} does not compute in {}{}", config.locate("model.precision"),
        device.name(), dtype_name(precision),
        precision == DType::bf16 ? " (the IPU has f16 and f32: use f16 with loss scaling)"
                                 : " (use bf16 or f32)"));
  }
  if (across_processes && config.batch.replicas != 1 &&
      config.batch.replicas != across_processes->size()) {
    throw ConfigError(fmt::format(
        "{}: key 'batch.replicas': {} replicas, but mpirun started {} ranks (one replica each); "
        "set it to {} or leave it at 1",
        config.locate("batch.replicas"), config.batch.replicas, across_processes->size(),
        across_processes->size()));
  }
}

std::optional<double> estimate_gradient_all_reduce(Device& device, std::int64_t parameters,
                                                   int replicas) {
  if (replicas <= 1) return std::nullopt;
  return device.estimate_seconds(
      KernelDesc{OpKind::all_reduce, DType::f32, {{parameters}}, AllReduceAttrs{replicas}});
}

std::optional<TrainingStepEstimate> estimate_training_step(const BertTraining& model,
                                                           std::int64_t grad_accum,
                                                           double sequences,
                                                           std::optional<double> all_reduce) {
  const auto work = model.estimate_work();
  if (!work) return std::nullopt;
  TrainingStepEstimate e;
  e.forward = work->forward * static_cast<double>(grad_accum);
  e.backward = work->backward * static_cast<double>(grad_accum);
  e.optimizer = work->optimizer;
  e.all_reduce = all_reduce.value_or(0.0);
  e.host_io = work->host_io * static_cast<double>(grad_accum);
  e.sequences_per_second = sequences / e.seconds();
  return e;
}

namespace {

/// Sequences in a micro-batch: its rows, or with packed rows their
/// sequences (the NSP or span slots that are not empty).
std::int64_t sequences_in(const TrainingBatch& batch, std::int64_t rows) {
  const auto filled = [](const std::vector<std::int32_t>& slots) {
    return static_cast<std::int64_t>(
        std::count_if(slots.begin(), slots.end(), [](std::int32_t v) { return v != -100; }));
  };
  if (!batch.nsp_positions.empty()) return filled(batch.nsp_labels);
  if (static_cast<std::int64_t>(batch.start_positions.size()) > rows)
    return filled(batch.start_positions);
  return rows;
}

}  // namespace

PretrainStep Trainer::step(std::int64_t number) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t accumulation = config_.batch.grad_accum;
  const auto replica_count = static_cast<std::uint64_t>(replicas_.size());
  PretrainStep record;
  record.step = number;
  record.learning_rate = learning_rate_at(config_.optimizer, number, config_.steps);
  record.loss_scale = scaler_.scale();
  std::int64_t sequences = 0;
  const StepLosses mean = model_.accumulate(
      [&](int micro) {
        const auto index =
            static_cast<std::uint64_t>((number - 1) * accumulation + micro) * replica_count +
            static_cast<std::uint64_t>(replicas_.rank());
        TrainingBatch batch = batches_(index);
        sequences += sequences_in(batch, config_.batch.micro);
        return batch;
      },
      static_cast<int>(accumulation), scaler_.scale());
  std::array<float, 3> losses{static_cast<float>(mean.mlm), static_cast<float>(mean.nsp),
                              static_cast<float>(mean.task)};
  replicas_.all_reduce(losses.data(), losses.size(), DType::f32, ReduceOp::mean);
  // Exact in f32 up to 2^24 sequences per step.
  float counted = static_cast<float>(sequences);
  replicas_.all_reduce(&counted, 1, DType::f32, ReduceOp::sum);
  record.sequences = static_cast<std::int64_t>(counted);
  model_.all_reduce_gradients(replicas_);
  record.mlm_loss = losses[0];
  record.nsp_loss = losses[1];
  record.task_loss = losses[2];
  const auto norm = model_.optimizer_step(record.learning_rate, scaler_.scale());
  record.skipped = !norm.has_value();
  record.grad_norm = norm.value_or(std::numeric_limits<double>::infinity());
  scaler_.update(record.skipped);
  if (record.skipped && replicas_.rank() == 0) {
    spdlog::warn("step {}: gradient overflow at loss scale {:g}: step skipped{}", number,
                 record.loss_scale,
                 scaler_.mode() == LossScaler::Mode::dynamic
                     ? fmt::format(", loss scale now {:g}", scaler_.scale())
                     : "");
  }
  record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return record;
}

void Trainer::save(std::int64_t step, TrainingLog& log) {
  if (!store_.enabled()) return;
  // Sharded optimizer state is gathered from every replica: a collective.
  const bool lead = replicas_.rank() == 0;
  TensorMap snapshot;
  if (lead || sharded_) snapshot = model_.state();
  if (!lead) return;
  auto metadata = scaler_.metadata();
  metadata.insert(metadata_.begin(), metadata_.end());
  const auto path = store_.save(step, snapshot, std::move(metadata));
  log.checkpoints.push_back(path);
  spdlog::info("checkpoint {}", path.string());
}

void Trainer::run(std::int64_t first, std::int64_t last, const PretrainObserver& observer,
                  TrainingLog& log) {
  const bool lead = replicas_.rank() == 0;
  for (std::int64_t number = first; number <= last; ++number) {
    const PretrainStep record = step(number);
    if (lead) {
      log.steps.push_back(record);
      if (observer) observer(record, config_.steps);
    }
    // Every replica saves: with sharding, saving is a collective.
    if (number == last || (config_.checkpoint.every > 0 && number % config_.checkpoint.every == 0))
      save(number, log);
  }
}

}  // namespace polyhal
