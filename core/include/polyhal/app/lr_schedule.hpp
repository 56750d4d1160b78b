#pragma once
/// @file lr_schedule.hpp
/// The learning-rate schedules of the seeds' recipes.
#include <cstdint>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"

namespace polyhal {

/// Learning rate at optimizer step `step` (1-based) of `total`: linear warm-up
/// over warmup_steps, then the schedule (polynomial decay to
/// end_learning_rate, natural exponential, a step list, or constant).
double learning_rate_at(const OptimizerSection& optimizer, std::int64_t step, std::int64_t total);

}  // namespace polyhal
