#include "polyhal/app/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace polyhal {

double learning_rate_at(const LearningRateSchedule& o, std::int64_t step, std::int64_t total) {
  if (o.warmup_steps > 0 && step <= o.warmup_steps) {
    return o.learning_rate * static_cast<double>(step) / static_cast<double>(o.warmup_steps);
  }
  if (o.schedule == "constant") return o.learning_rate;
  if (o.schedule == "exponential") {
    return o.learning_rate * std::pow(o.decay_rate, static_cast<double>(step - o.warmup_steps) /
                                                        static_cast<double>(o.decay_steps));
  }
  if (o.schedule == "steps") {
    double lr = o.learning_rate;
    for (const auto& [from, value] : o.step_list) {
      if (step >= from) lr = value;
    }
    return lr;
  }
  // Polynomial decay from the end of warm-up to `total`.
  const double span = static_cast<double>(std::max<std::int64_t>(1, total - o.warmup_steps));
  const double done = std::min(1.0, static_cast<double>(step - o.warmup_steps) / span);
  return (o.learning_rate - o.end_learning_rate) * std::pow(1.0 - done, o.power) +
         o.end_learning_rate;
}

}  // namespace polyhal
