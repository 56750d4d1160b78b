#include "train/training_model.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "train/estimated_timeline.hpp"

namespace polyhal {

std::optional<double> estimate_gradient_all_reduce(Device& device, std::int64_t parameters,
                                                   int replicas) {
  if (replicas <= 1) return std::nullopt;
  return device.estimate_seconds(
      KernelDesc{OpKind::all_reduce, DType::f32, {{parameters}}, AllReduceAttrs{replicas}});
}

namespace {

/// What both kinds of model do alike: forwarded as is.
template <class Model>
class Forwarding : public TrainingModel {
 public:
  explicit Forwarding(std::unique_ptr<Model> model) : model_(std::move(model)) {}
  void all_reduce_gradients(Communicator& replicas) override {
    model_->all_reduce_gradients(replicas);
  }
  std::optional<double> optimizer_step(double learning_rate, double loss_scale) override {
    return model_->optimizer_step(learning_rate, loss_scale);
  }
  TensorMap state() const override { return model_->state(); }
  TensorMap weights() const override { return model_->weights(); }
  void shard_optimizer_state(Communicator& replicas) override {
    model_->shard_optimizer_state(replicas);
  }
  void load_weights(const TensorMap& weights) override { model_->load_weights(weights); }
  void load_state(const TensorMap& state, std::int64_t steps) override {
    model_->load_state(state, steps);
  }

 protected:
  std::unique_ptr<Model> model_;
};

class WholeModel final : public Forwarding<BertTraining> {
 public:
  using Forwarding::Forwarding;

  StepLosses accumulate(const std::function<TrainingBatch(int)>& batch, int count,
                        double loss_scale) override {
    // Summed in f32 as the losses are reported and all-reduced.
    std::array<float, 3> sums{};
    const auto share = static_cast<double>(count);
    for (int micro = 0; micro < count; ++micro) {
      const TraceTrack::Scope traced(host_track_, fmt::format("micro-batch {}", micro), "pipeline",
                                     {{"micro_batch", micro}});
      if (overlap_ != nullptr && micro == count - 1)
        model_->reduce_gradients_during_next_backward(*overlap_, bucket_bytes_);
      const StepLosses l = model_->forward_backward(batch(micro), count, loss_scale);
      sums[0] += static_cast<float>(l.mlm / share);
      sums[1] += static_cast<float>(l.nsp / share);
      sums[2] += static_cast<float>(l.task / share);
    }
    StepLosses mean;
    mean.mlm = sums[0];
    mean.nsp = sums[1];
    mean.task = sums[2];
    return mean;
  }

  void overlap_gradient_all_reduce(Communicator& replicas, std::size_t bucket_bytes) override {
    if (replicas.size() == 1) return;
    overlap_ = &replicas;
    bucket_bytes_ = bucket_bytes;
  }

  TrainingPlan plan(Device& device, const StepWork& work) const override {
    TrainingPlan plan;
    plan.memory = model_->plan_memory();
    plan.parameters = model_->parameter_count();
    plan.all_reduce = estimate_gradient_all_reduce(device, plan.parameters, work.replicas);
    plan.estimate = estimate(device, work);
    return plan;
  }

  std::optional<TrainingStepEstimate> estimate(Device& device,
                                               const StepWork& work) const override {
    const auto per_micro_batch = model_->estimate_work();
    if (!per_micro_batch) return std::nullopt;
    const auto all_reduce =
        estimate_gradient_all_reduce(device, model_->parameter_count(), work.replicas);
    const auto accumulation = static_cast<double>(work.accumulation);
    TrainingStepEstimate e;
    e.forward = per_micro_batch->forward * accumulation;
    e.backward = per_micro_batch->backward * accumulation;
    e.optimizer = per_micro_batch->optimizer;
    e.all_reduce = all_reduce.value_or(0.0);
    if (work.overlap_bucket_bytes > 0 && e.all_reduce > 0) {
      // Every bucket but the last (the embeddings, written at the very end
      // of backward) can reduce while one micro-batch's backward runs.
      const double gradient_bytes = 4.0 * static_cast<double>(model_->parameter_count());
      const double last_bucket =
          std::min(1.0, static_cast<double>(work.overlap_bucket_bytes) / gradient_bytes);
      const double exposed =
          std::max(e.all_reduce - per_micro_batch->backward, e.all_reduce * last_bucket);
      e.all_reduce_hidden = e.all_reduce - exposed;
      e.all_reduce = exposed;
    }
    e.host_io = per_micro_batch->host_io * accumulation;
    e.sequences_per_second = work.sequences / e.seconds();
    return e;
  }

  std::vector<OpTime> profile() const override { return model_->profile(); }

  void attach_trace(TraceLane& lane) override {
    lane_ = &lane;
    host_track_ = &lane.track(fmt::format("replica {}", lane.replica()));
    model_->set_trace(host_track_);
  }

  std::optional<double> trace_estimated_step(TraceLane& lane, Device& device, const StepWork& work,
                                             std::int64_t step, double start_us) const override {
    return trace_estimated_whole_step(lane, *model_, device, work, step, start_us);
  }

 private:
  Communicator* overlap_ = nullptr;
  std::size_t bucket_bytes_ = 0;
};

class Pipeline final : public Forwarding<PipelinedTraining> {
 public:
  using Forwarding::Forwarding;

  StepLosses accumulate(const std::function<TrainingBatch(int)>& batch, int count,
                        double loss_scale) override {
    // The 1F1B schedule takes the step's micro-batches at once.
    std::vector<TrainingBatch> batches;
    batches.reserve(static_cast<std::size_t>(count));
    for (int micro = 0; micro < count; ++micro) batches.push_back(batch(micro));
    return model_->forward_backward(batches, loss_scale);
  }

  TrainingPlan plan(Device& device, const StepWork& work) const override {
    TrainingPlan plan;
    plan.stage_memory = model_->plan_memory(work.accumulation);
    bool fits = true;
    std::size_t fullest = 0;
    for (std::size_t s = 0; s < plan.stage_memory.size(); ++s) {
      fits = fits && plan.stage_memory[s].fits;
      if (plan.stage_memory[s].required_bytes > plan.stage_memory[fullest].required_bytes)
        fullest = s;
    }
    plan.memory = plan.stage_memory[fullest];
    plan.memory.fits = fits;
    plan.parameters = model_->parameter_count();
    plan.all_reduce = largest_stage_all_reduce(device, work);
    plan.estimate = estimate(device, work);
    return plan;
  }

  std::optional<TrainingStepEstimate> estimate(Device& device,
                                               const StepWork& work) const override {
    return model_->estimate_step(work.accumulation, work.sequences,
                                 largest_stage_all_reduce(device, work).value_or(0.0));
  }

  std::vector<OpTime> profile() const override { return {}; }

  void attach_trace(TraceLane& lane) override {
    lane_ = &lane;
    host_track_ = &lane.track(fmt::format("replica {} host", lane.replica()));
    model_->set_trace(&lane);
  }

  std::optional<double> trace_estimated_step(TraceLane& lane, Device& device, const StepWork& work,
                                             std::int64_t step, double start_us) const override {
    return trace_estimated_pipeline_step(lane, *model_, device, work, step, start_us);
  }

 private:
  // Each stage all-reduces its own gradients over the replicas, all stages
  // at once: the largest stage's all-reduce is the one waited for.
  std::optional<double> largest_stage_all_reduce(Device& device, const StepWork& work) const {
    std::int64_t largest = 0;
    for (int s = 0; s < model_->stage_count(); ++s)
      largest = std::max(largest, model_->stage_parameters(s));
    return estimate_gradient_all_reduce(device, largest, work.replicas);
  }
};

}  // namespace

std::unique_ptr<TrainingModel> whole_model(std::unique_ptr<BertTraining> model) {
  return std::make_unique<WholeModel>(std::move(model));
}

std::unique_ptr<TrainingModel> pipelined_model(std::unique_ptr<PipelinedTraining> model) {
  return std::make_unique<Pipeline>(std::move(model));
}

}  // namespace polyhal
