#include "train/trainer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "polyhal/error.hpp"

namespace polyhal {

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

// Samples in 128 bits: steps x global batch may pass 2^63 for configs at their limits.
__extension__ using WideCount = __int128;

bool passes_multiple(std::int64_t step, std::int64_t samples_per_step, std::int64_t every) {
  if (every <= 0 || step < 1) return false;
  const WideCount per = samples_per_step;
  return WideCount{step} * per / every > WideCount{step - 1} * per / every;
}

bool samples_reached(std::int64_t step, std::int64_t samples_per_step, std::int64_t samples) {
  return WideCount{step} * samples_per_step >= samples;
}

TrainingStep Trainer::step(std::int64_t number) {
  const auto start = std::chrono::steady_clock::now();
  if (TraceLane* lane = model_.trace_lane()) lane->set_step(number);
  replicas_.set_step(number);  // before accumulate, which may reduce gradients
  TraceTrack* const trace = model_.host_track();
  const TraceTrack::Scope step_slice(trace, fmt::format("step {}", number), "step",
                                     {{"step", number}});
  const std::int64_t accumulation = settings_.grad_accum;
  const auto replica_count = static_cast<std::uint64_t>(replicas_.size());
  TrainingStep record;
  record.step = number;
  record.learning_rate = settings_.learning_rate(number);
  record.loss_scale = scaler_.scale();
  std::int64_t sequences = 0;
  const StepLosses mean = model_.accumulate(
      [&](int micro) {
        const auto index =
            static_cast<std::uint64_t>((number - 1) * accumulation + micro) * replica_count +
            static_cast<std::uint64_t>(replicas_.rank());
        const TraceTrack::Scope data(trace, "data", "host", {{"batch_index", index}});
        TrainingBatch batch = batches_(index);
        sequences += sequences_in(batch, settings_.micro_batch);
        return batch;
      },
      static_cast<int>(accumulation), scaler_.scale());
  std::array<float, 3> losses{static_cast<float>(mean.mlm), static_cast<float>(mean.nsp),
                              static_cast<float>(mean.task)};
  float counted = static_cast<float>(sequences);
  {
    const TraceTrack::Scope reduce(trace, "all-reduce losses", "collective");
    replicas_.set_purpose("the step's losses");
    replicas_.all_reduce(losses.data(), losses.size(), DType::f32, ReduceOp::mean);
    replicas_.set_purpose("the step's sequence count");
    // Exact in f32 up to 2^24 sequences per step.
    replicas_.all_reduce(&counted, 1, DType::f32, ReduceOp::sum);
  }
  record.sequences = static_cast<std::int64_t>(counted);
  {
    const TraceTrack::Scope reduce(trace, "all-reduce gradients", "collective",
                                   {{"replicas", replicas_.size()}});
    model_.all_reduce_gradients(replicas_);
  }
  record.mlm_loss = losses[0];
  record.nsp_loss = losses[1];
  record.task_loss = losses[2];
  std::optional<double> norm;
  {
    const TraceTrack::Scope update(trace, "optimizer", "host");
    norm = model_.optimizer_step(record.learning_rate, scaler_.scale());
  }
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

void Trainer::save(std::int64_t step, TrainingLog& log, double loss) {
  if (!store_.enabled()) return;
  const TraceTrack::Scope traced(model_.host_track(), "checkpoint", "host", {{"step", step}});
  // Sharded optimizer state is gathered from every replica: a collective.
  const bool lead = replicas_.rank() == 0;
  TensorMap snapshot;
  if (lead || settings_.sharded) snapshot = model_.state();
  if (!lead) return;
  auto metadata = scaler_.metadata();
  metadata.insert(settings_.metadata.begin(), settings_.metadata.end());
  metadata["loss"] = fmt::format("{}", loss);
  const auto path = store_.save(step, snapshot, std::move(metadata));
  log.checkpoints.push_back(path);
  spdlog::info("checkpoint {}", path.string());
  for (const auto& old : store_.remove_all_but_newest(settings_.keep_last))
    spdlog::info("removed {} (checkpoint.keep_last {})", old.string(), settings_.keep_last);
}

int Trainer::agreed_stop_signal() {
  if (settings_.stop_signal == nullptr) return 0;
  // The signal reaches the replicas at different moments: they stop after
  // the same step only if they agree (the largest signal number seen).
  float signal = static_cast<float>(settings_.stop_signal->load());
  if (replicas_.size() > 1) {
    replicas_.set_purpose("whether a signal asks the run to stop");
    replicas_.all_reduce(&signal, 1, DType::f32, ReduceOp::max);
  }
  return static_cast<int>(signal);
}

bool Trainer::checkpoint_due(std::int64_t number) const {
  if (!samples_reached(number, settings_.samples_per_step, settings_.checkpoint_start_samples))
    return false;
  if (settings_.checkpoint_every > 0 && number % settings_.checkpoint_every == 0) return true;
  return passes_multiple(number, settings_.samples_per_step, settings_.checkpoint_every_samples);
}

void Trainer::run(std::int64_t first, std::int64_t last, const StepObserver& observer,
                  TrainingLog& log, const AfterStep& after_step) {
  const bool lead = replicas_.rank() == 0;
  // While this loop runs, a signal waits for the step in flight to end.
  struct Listening {
    std::atomic<int>* count;
    explicit Listening(std::atomic<int>* c) : count(c) {
      if (count) ++*count;
    }
    ~Listening() {
      if (count) --*count;
    }
    Listening(const Listening&) = delete;
    Listening& operator=(const Listening&) = delete;
  } listening(settings_.stop_listeners);
  std::int64_t non_finite = 0;  // steps in a row (the loss is the same on every replica)
  for (std::int64_t number = first; number <= last; ++number) {
    const TrainingStep record = step(number);
    if (lead) {
      log.steps.push_back(record);
      if (observer) observer(record, settings_.total_steps);
    }
    non_finite = std::isfinite(record.loss()) ? 0 : non_finite + 1;
    if (non_finite > 0 && (non_finite >= settings_.stop_after_non_finite || number == last)) {
      throw RuntimeFailure(fmt::format(
          "the loss has not been finite for {} steps in a row (steps {} to {}): the run diverged "
          "and stops without writing a checkpoint of it{}; lower optimizer.learning_rate, clip "
          "with optimizer.max_grad_norm, or train in f32",
          non_finite, number - non_finite + 1, number,
          log.checkpoints.empty()
              ? ""
              : fmt::format(" (the last good one: {})", log.checkpoints.back().string())));
    }
    // A step with a non-finite loss is never checkpointed over good state.
    if (non_finite > 0) continue;
    const bool stop = after_step && after_step(number, number == last);
    const int signal = number == last ? 0 : agreed_stop_signal();
    // Every replica saves: with sharding, saving is a collective.
    if (number == last || stop || signal != 0 || checkpoint_due(number))
      save(number, log, record.loss());
    if (signal != 0) {
      stopped_by_signal_ = signal;
      log.stopped_by_signal = signal;
      if (lead)
        spdlog::warn("stopped by {} after step {} of {}{}", strsignal(signal), number,
                     settings_.total_steps,
                     store_.enabled() ? "; the next run resumes from its checkpoint"
                                      : " (no checkpoint.dir: nothing is kept)");
      break;
    }
    if (stop) break;
  }
}

}  // namespace polyhal
