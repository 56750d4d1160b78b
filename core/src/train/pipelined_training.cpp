#include "polyhal/app/pipelined_training.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "polyhal/app/bert_weights.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

const std::string kTiedWeight = kWordEmbeddings;

/// The per-stage action lists of 1F1B.
std::vector<std::vector<PipelineAction>> per_stage_1f1b(int stages, int micro_batches) {
  std::vector<std::vector<PipelineAction>> lists(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    auto& list = lists[static_cast<std::size_t>(s)];
    const int warmup = std::min(stages - s - 1, micro_batches);
    int forward = 0, backward = 0;
    for (; forward < warmup; ++forward) list.push_back({s, true, forward});
    while (forward < micro_batches) {
      list.push_back({s, true, forward++});
      list.push_back({s, false, backward++});
    }
    while (backward < micro_batches) list.push_back({s, false, backward++});
  }
  return lists;
}

}  // namespace

std::vector<PipelineAction> one_forward_one_backward(int stages, int micro_batches) {
  const auto lists = per_stage_1f1b(stages, micro_batches);
  std::vector<std::size_t> next(static_cast<std::size_t>(stages), 0);
  // done_forward[s][m], done_backward[s][m]
  std::vector<std::vector<bool>> fwd(static_cast<std::size_t>(stages),
                                     std::vector<bool>(static_cast<std::size_t>(micro_batches))),
      bwd = fwd;
  std::vector<PipelineAction> order;
  const std::size_t total = 2 * static_cast<std::size_t>(stages) * micro_batches;
  while (order.size() < total) {
    bool progressed = false;
    for (int s = 0; s < stages; ++s) {  // one tick: every stage that can, acts once
      auto& i = next[static_cast<std::size_t>(s)];
      if (i == lists[static_cast<std::size_t>(s)].size()) continue;
      const PipelineAction a = lists[static_cast<std::size_t>(s)][i];
      const auto m = static_cast<std::size_t>(a.micro_batch);
      const auto us = static_cast<std::size_t>(s);
      const bool ready = a.forward ? (s == 0 || fwd[us - 1][m])
                                   : (fwd[us][m] && (s == stages - 1 || bwd[us + 1][m]));
      if (!ready) continue;
      (a.forward ? fwd : bwd)[us][m] = true;
      order.push_back(a);
      ++i;
      progressed = true;
    }
    if (!progressed) throw std::logic_error("1F1B schedule deadlocked");
  }
  return order;
}

int in_flight(int stages, int stage, int micro_batches) {
  return std::min(stages - stage, micro_batches);
}

PipelinedTraining::PipelinedTraining(const std::vector<Device*>& devices, const BertConfig& config,
                                     BertShape micro_batch, const BertTrainingOptions& options,
                                     const std::vector<PipelineStage>& stages) {
  if (stages.empty() || devices.size() != stages.size())
    throw ConfigError(
        fmt::format("pipeline: {} stages on {} devices", stages.size(), devices.size()));
  for (std::size_t s = 0; s < stages.size(); ++s) {
    BertTrainingOptions own = options;
    own.recompute.clear();
    const std::int64_t last =
        stages[s].last_layer < 0 ? config.num_hidden_layers : stages[s].last_layer;
    for (const std::int64_t l : options.recompute)
      if (l >= stages[s].first_layer && l < last) own.recompute.insert(l);
    stages_.push_back(std::make_unique<BertTraining>(*devices[s], config, micro_batch,
                                                     std::move(own), stages[s]));
  }
  // The last stage's MLM decoder holds a copy of the word embeddings.
  if (stages.size() > 1 && options.head.kind == TaskHead::Kind::pretraining)
    tied_elements_ = config.vocab_size * config.hidden_size;
}

std::vector<MemoryReport> PipelinedTraining::plan_memory(int micro_batches) const {
  std::vector<MemoryReport> reports;
  const int count = stage_count();
  for (int s = 0; s < count; ++s) {
    const auto& stage = *stages_[static_cast<std::size_t>(s)];
    const int extra = in_flight(count, s, micro_batches) - 1;
    std::vector<MemoryItem> stashes;
    if (extra > 0) {
      stashes.push_back({"pipeline stash", fmt::format("{} x", extra),
                         static_cast<std::uint64_t>(extra) * stage.stash_bytes()});
    }
    reports.push_back(stage.plan_memory(stashes));
  }
  return reports;
}

void PipelinedTraining::load_weights(const TensorMap& weights) {
  for (auto& stage : stages_) stage->load_weights(weights);
}

void PipelinedTraining::set_trace(TraceLane* lane) {
  traces_.assign(stages_.size(), nullptr);
  for (std::size_t s = 0; s < stages_.size(); ++s) {
    if (lane) traces_[s] = &lane->track(fmt::format("replica {} stage {}", lane->replica(), s));
    stages_[s]->set_trace(traces_[s]);
  }
  if (!lane) traces_.clear();
}

StepLosses PipelinedTraining::forward_backward(const std::vector<TrainingBatch>& micro_batches,
                                               double loss_scale) {
  const int count = stage_count();
  const int m_count = static_cast<int>(micro_batches.size());
  // Between stages: activations forward, gradients backward, per micro-batch.
  std::map<std::pair<int, int>, std::vector<float>> activations, gradients;
  std::map<std::pair<int, int>, BertTraining::Stash> stashes;
  StepLosses total;
  for (const PipelineAction& a : one_forward_one_backward(count, m_count)) {
    BertTraining& stage = *stages_[static_cast<std::size_t>(a.stage)];
    const auto& batch = micro_batches[static_cast<std::size_t>(a.micro_batch)];
    const bool last = a.stage == count - 1;
    const TraceTrack::Scope pass(
        traces_.empty() ? nullptr : traces_[static_cast<std::size_t>(a.stage)],
        fmt::format("{}{}", a.forward ? 'F' : 'B', a.micro_batch), "pipeline",
        {{"micro_batch", a.micro_batch}, {"stage", a.stage}});
    if (a.forward) {
      std::vector<float> input;
      if (a.stage > 0) {
        input = std::move(activations.at({a.stage - 1, a.micro_batch}));
        activations.erase({a.stage - 1, a.micro_batch});
      }
      auto output = stage.stage_forward(batch, input, m_count, loss_scale);
      if (last) {
        const StepLosses l = stage.last_losses();
        total.mlm += l.mlm / m_count;
        total.nsp += l.nsp / m_count;
        total.task += l.task / m_count;
      } else {
        activations[{a.stage, a.micro_batch}] = std::move(output);
      }
      stashes[{a.stage, a.micro_batch}] = stage.stash();
      continue;
    }
    stage.unstash(stashes.at({a.stage, a.micro_batch}));
    stashes.erase({a.stage, a.micro_batch});
    std::vector<float> output_grad;
    if (!last) {
      output_grad = std::move(gradients.at({a.stage + 1, a.micro_batch}));
      gradients.erase({a.stage + 1, a.micro_batch});
    }
    auto input_grad = stage.stage_backward(output_grad);
    if (a.stage > 0) gradients[{a.stage, a.micro_batch}] = std::move(input_grad);
  }
  // The word embeddings tied to the last stage's MLM decoder: both copies
  // take the sum of their gradients.
  if (count > 1) {
    auto& first = *stages_.front();
    auto& decoder = *stages_.back();
    const TensorMap tail = decoder.gradients();
    if (const auto it = tail.find(kTiedWeight); it != tail.end()) {
      std::vector<float> sum = first.gradients().at(kTiedWeight).values;
      for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += it->second.values[i];
      first.set_gradient(kTiedWeight, sum);
      decoder.set_gradient(kTiedWeight, sum);
    }
  }
  return total;
}

std::int64_t PipelinedTraining::stage_parameters(int stage) const {
  return stages_.at(static_cast<std::size_t>(stage))->parameter_count();
}

std::int64_t PipelinedTraining::parameter_count() const {
  std::int64_t total = 0;
  for (const auto& stage : stages_) total += stage->parameter_count();
  return total - tied_elements_;
}

std::optional<TrainingStepEstimate> PipelinedTraining::estimate_step(int accumulation,
                                                                     double sequences,
                                                                     double all_reduce) const {
  std::optional<TrainingWorkEstimate> slowest;
  double optimizer = 0, host_io = 0;
  for (const auto& stage : stages_) {
    const auto work = stage->estimate_work();
    if (!work) return std::nullopt;
    optimizer = std::max(optimizer, work->optimizer);
    // The first stage takes the ids, the last the labels, each on its own IPU.
    host_io = std::max(host_io, work->host_io);
    if (!slowest || work->forward + work->backward > slowest->forward + slowest->backward)
      slowest = work;
  }
  TrainingStepEstimate e;
  e.forward = slowest->forward * accumulation;
  e.backward = slowest->backward * accumulation;
  e.pipeline_ramp = (slowest->forward + slowest->backward) * (stage_count() - 1);
  e.optimizer = optimizer;
  e.all_reduce = all_reduce;
  e.host_io = host_io * accumulation;
  e.sequences_per_second = sequences / e.seconds();
  return e;
}

std::optional<double> PipelinedTraining::optimizer_step(double learning_rate, double loss_scale) {
  double sum = 0;
  for (const auto& stage : stages_) sum += stage->gradient_sum_of_squares();
  if (tied_elements_ > 0) {  // the tied gradient sits in two stages: count it once
    const TensorMap gradients = stages_.back()->gradients();  // (outlives the loop)
    for (const float g : gradients.at(kTiedWeight).values) sum -= static_cast<double>(g) * g;
  }
  std::optional<double> norm;
  for (auto& stage : stages_) norm = stage->apply_update(learning_rate, loss_scale, sum);
  return norm;
}

void PipelinedTraining::all_reduce_gradients(Communicator& replicas) {
  for (auto& stage : stages_) stage->all_reduce_gradients(replicas);
}

void PipelinedTraining::shard_optimizer_state(Communicator& replicas) {
  for (auto& stage : stages_) stage->shard_optimizer_state(replicas);
}

TensorMap PipelinedTraining::state() const {
  TensorMap all;
  for (const auto& stage : stages_)
    for (auto& [name, t] : stage->state()) all.insert_or_assign(name, std::move(t));
  return all;
}

void PipelinedTraining::load_state(const TensorMap& state, std::int64_t steps) {
  for (auto& stage : stages_) stage->load_state(state, steps);
}

TensorMap PipelinedTraining::weights() const {
  TensorMap all;
  for (const auto& stage : stages_)
    for (auto& [name, w] : stage->weights()) all.insert_or_assign(name, std::move(w));
  return all;
}

TensorMap PipelinedTraining::gradients() const {
  TensorMap all;
  for (const auto& stage : stages_)
    for (auto& [name, g] : stage->gradients()) all.insert_or_assign(name, std::move(g));
  return all;
}

}  // namespace polyhal
