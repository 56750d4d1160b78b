#include "tasks/training_model.hpp"

#include <array>
#include <vector>

namespace polyhal {
namespace {

/// What both kinds of model do alike: forwarded as is.
template <class Model>
class Forwarding : public TrainingModel {
 public:
  explicit Forwarding(Model& model) : model_(model) {}
  void all_reduce_gradients(Communicator& replicas) override {
    model_.all_reduce_gradients(replicas);
  }
  std::optional<double> optimizer_step(double learning_rate, double loss_scale) override {
    return model_.optimizer_step(learning_rate, loss_scale);
  }
  TensorMap state() const override { return model_.state(); }
  TensorMap weights() const override { return model_.weights(); }

 protected:
  Model& model_;
};

class SingleProgram final : public Forwarding<BertTraining> {
 public:
  using Forwarding::Forwarding;

  StepLosses accumulate(const std::function<TrainingBatch(int)>& batch, int count,
                        double loss_scale) override {
    // Summed in f32 as the losses are reported and all-reduced.
    std::array<float, 3> sums{};
    const auto share = static_cast<double>(count);
    for (int micro = 0; micro < count; ++micro) {
      const StepLosses l = model_.forward_backward(batch(micro), count, loss_scale);
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
    return model_.forward_backward(batches, loss_scale);
  }
};

}  // namespace

std::unique_ptr<TrainingModel> training_model(BertTraining& model) {
  return std::make_unique<SingleProgram>(model);
}

std::unique_ptr<TrainingModel> training_model(PipelinedTraining& model) {
  return std::make_unique<Pipeline>(model);
}

}  // namespace polyhal
