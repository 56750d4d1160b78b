#pragma once
/// @file lr_schedule.hpp
/// The learning-rate schedules of the seeds' recipes.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// A learning-rate schedule, as optimizer.* gives it (docs/config-reference.md).
struct LearningRateSchedule {
  double learning_rate = 1e-3;  ///< the peak, after warm-up
  std::int64_t warmup_steps = 0;
  std::string schedule = "polynomial";  ///< polynomial | exponential | steps | constant
  double power = 1.0, end_learning_rate = 0.0, decay_rate = 0.96;
  std::int64_t decay_steps = 1000;  ///< exponential: lr x decay_rate^(step/decay_steps)
  std::vector<std::pair<std::int64_t, double>> step_list;  ///< steps: [[from_step, lr], ...]
};

/// Learning rate at optimizer step `step` (1-based) of `total`: linear warm-up
/// over warmup_steps, then the schedule (polynomial decay to
/// end_learning_rate, natural exponential, a step list, or constant).
double learning_rate_at(const LearningRateSchedule& schedule, std::int64_t step,
                        std::int64_t total);

}  // namespace polyhal
