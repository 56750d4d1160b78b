#include "tasks/pipeline_plan.hpp"

#include <algorithm>

#include "tasks/trainer.hpp"

namespace polyhal {

std::vector<Device*> pipeline_devices(Device& device, const std::vector<Device*>& opened,
                                      int replica, int stages) {
  std::vector<Device*> devices(static_cast<std::size_t>(stages), &device);
  const auto first = static_cast<std::size_t>(replica) * devices.size();
  if (opened.size() >= first + devices.size())
    std::copy_n(opened.begin() + static_cast<std::ptrdiff_t>(first), devices.size(),
                devices.begin());
  return devices;
}

PipelinePlan plan_pipeline(const PipelinedTraining& pipeline, Device& device, int accumulation,
                           int replicas, std::int64_t micro, double sequences_per_row) {
  PipelinePlan plan;
  plan.stage_memory = pipeline.plan_memory(accumulation);
  bool fits = true;
  std::size_t fullest = 0;
  for (std::size_t s = 0; s < plan.stage_memory.size(); ++s) {
    fits = fits && plan.stage_memory[s].fits;
    if (plan.stage_memory[s].required_bytes > plan.stage_memory[fullest].required_bytes)
      fullest = s;
  }
  plan.memory = plan.stage_memory[fullest];
  plan.memory.fits = fits;
  // Each stage all-reduces its own gradients over the replicas, all stages
  // at once: the largest stage's all-reduce is the one waited for.
  std::int64_t largest = 0;
  for (int s = 0; s < pipeline.stage_count(); ++s)
    largest = std::max(largest, pipeline.stage_parameters(s));
  plan.parameters = pipeline.parameter_count();
  plan.all_reduce = estimate_gradient_all_reduce(device, largest, replicas);
  const double rows = static_cast<double>(replicas) * accumulation * static_cast<double>(micro);
  plan.estimate =
      pipeline.estimate_step(accumulation, rows * sequences_per_row, plan.all_reduce.value_or(0.0));
  return plan;
}

}  // namespace polyhal
