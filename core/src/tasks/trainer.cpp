#include "tasks/trainer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <limits>

namespace polyhal {

PretrainStep Trainer::step(std::int64_t number) {
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t accumulation = config_.batch.grad_accum;
  const auto replica_count = static_cast<std::uint64_t>(replicas_.size());
  PretrainStep record;
  record.step = number;
  record.learning_rate = learning_rate_at(config_.optimizer, number, config_.steps);
  record.loss_scale = scaler_.scale();
  std::array<float, 2> losses{};
  for (std::int64_t micro = 0; micro < accumulation; ++micro) {
    const auto index =
        static_cast<std::uint64_t>((number - 1) * accumulation + micro) * replica_count +
        static_cast<std::uint64_t>(replicas_.rank());
    const auto micro_losses = model_.forward_backward(
        data_.batch(index), static_cast<int>(accumulation), scaler_.scale());
    losses[0] += static_cast<float>(micro_losses.mlm / static_cast<double>(accumulation));
    losses[1] += static_cast<float>(micro_losses.nsp / static_cast<double>(accumulation));
  }
  replicas_.all_reduce(losses.data(), losses.size(), DType::f32, ReduceOp::mean);
  model_.all_reduce_gradients(replicas_);
  record.mlm_loss = losses[0];
  record.nsp_loss = losses[1];
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

void Trainer::save(std::int64_t step, PretrainResult& result) {
  if (!store_.enabled()) return;
  // Sharded optimizer state is gathered from every replica: a collective.
  const bool lead = replicas_.rank() == 0;
  TensorMap snapshot;
  if (lead || sharded_) snapshot = model_.state();
  if (!lead) return;
  auto metadata = scaler_.metadata();
  metadata["model"] = model_name_;
  metadata["writer"] = "polyhal pretrain";
  const auto path = store_.save(step, snapshot, std::move(metadata));
  result.checkpoints.push_back(path);
  spdlog::info("checkpoint {}", path.string());
}

void Trainer::run(std::int64_t done, const PretrainObserver& observer, PretrainResult& result) {
  const bool lead = replicas_.rank() == 0;
  for (std::int64_t number = done + 1; number <= config_.steps; ++number) {
    const PretrainStep record = step(number);
    if (lead) {
      result.steps.push_back(record);
      if (observer) observer(record, config_.steps);
    }
    // Every replica saves: with sharding, saving is a collective.
    if (config_.checkpoint.every > 0 && number % config_.checkpoint.every == 0 &&
        number != config_.steps)
      save(number, result);
  }
  if (config_.steps > done) save(config_.steps, result);
}

}  // namespace polyhal
