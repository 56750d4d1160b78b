// Config section `optimizer`: the update rule, its learning-rate schedule,
// clipping, loss scaling and state sharding.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/config_keys.hpp"
#include "sections.hpp"

namespace polyhal::config_sections {
namespace {

/// A number in the interval from `low` to `high`, each end open or closed:
/// values outside make every step NaN or diverge, and the run would exit 0.
ReadAs<double> number_in(double low, bool low_open, double high, bool high_open) {
  return [=](const ConfigValue& v) {
    const double x = v.number();
    if ((low_open ? x <= low : x < low) || (high_open ? x >= high : x > high))
      v.fail(fmt::format("expected a number in {}{:g}, {:g}{}, got {:g}", low_open ? "(" : "[", low,
                         high, high_open ? ")" : "]", x));
    return x;
  };
}

/// The largest learning rate taken: far above any recipe (LAMB at 0.006,
/// SGD at a few), far below where an update overflows f32.
constexpr double kMaxLearningRate = 100.0;

}  // namespace

ConfigSection optimizer() {
  ConfigSection section{.name = "optimizer"};
  using O = OptimizerSection;
  SectionKeys<O> keys(
      section, [](RunConfig & c) -> auto& { return c.optimizer; },
      std::vector<TaskTrait>{TaskTrait::trains});
  keys.add("name", &O::name, "lamb, adamw or sgd", one_of({"lamb", "adamw", "sgd"}))
      .add("learning_rate", &O::learning_rate, "peak learning rate",
           number_in(0, true, kMaxLearningRate, false))
      .add("learning_rate_per_worker", &O::learning_rate_per_worker,
           "peak learning rate per worker, as Habana's scripts take it: multiplied by the "
           "job's replicas (instead of learning_rate)",
           number_in(0, true, kMaxLearningRate, false))
      .add("beta1", &O::beta1, "Adam/LAMB first moment decay", number_in(0, false, 1, true))
      .add("beta2", &O::beta2, "Adam/LAMB second moment decay", number_in(0, false, 1, true))
      .add("epsilon", &O::epsilon, "Adam/LAMB epsilon", number_in(0, true, 1, false))
      .add("weight_decay", &O::weight_decay, "decoupled weight decay (not on biases and LayerNorm)",
           number_in(0, false, 1, false))
      .add("momentum", &O::momentum, "sgd momentum", number_in(0, false, 1, true))
      .add("warmup_steps", &O::warmup_steps, "linear warm-up steps", at_least(0))
      .add("schedule", &O::schedule, "polynomial, exponential, steps or constant",
           one_of({"polynomial", "exponential", "steps", "constant"}))
      .add("power", &O::power, "polynomial decay power", number_in(0, false, 100, false))
      .add("end_learning_rate", &O::end_learning_rate,
           "polynomial: the learning rate at the last step",
           number_in(0, false, kMaxLearningRate, false))
      .add("decay_rate", &O::decay_rate, "exponential: lr x decay_rate^(step/decay_steps)",
           number_in(0, true, 1, false))
      .add("decay_steps", &O::decay_steps, "exponential: see decay_rate")
      .custom(
          "step_list", "steps schedule: [[from_step, learning_rate], ...]",
          [](const ConfigValue& v, O& o) {
            if (!v.is_list()) v.fail("expected a list of [from_step, learning_rate]");
            for (const auto& entry : v.items()) {
              const auto pair = entry.items();
              if (!entry.is_list() || pair.size() != 2)
                v.fail("expected a list of [from_step, learning_rate]");
              const std::int64_t from = pair[0].integer(0);
              // An entry after a later one would never apply (the last one reached wins).
              if (!o.step_list.empty() && from <= o.step_list.back().first)
                v.fail(
                    fmt::format("from_step {} comes after {}: list the steps in increasing "
                                "order, each once",
                                from, o.step_list.back().first));
              o.step_list.emplace_back(from, number_in(0, false, kMaxLearningRate, false)(pair[1]));
            }
          },
          [](const O& o) {
            std::vector<std::string> steps;
            for (const auto& [from, lr] : o.step_list)
              steps.push_back(fmt::format("[{}, {}]", from, lr));
            return fmt::format("[{}]", fmt::join(steps, ", "));
          })
      .add("max_grad_norm", &O::max_grad_norm, "clip the global gradient norm (0: off)",
           number_in(0, false, 1e6, false))
      .add("loss_scaling", &O::loss_scaling, "auto (dynamic for f16), static, dynamic or none",
           one_of({"auto", "none", "static", "dynamic"}))
      .add("loss_scale", &O::loss_scale, "the static scale, or the dynamic one's start",
           number_in(0, true, 4294967296.0, false))
      .add("loss_scale_growth_interval", &O::loss_scale_growth_interval,
           "dynamic: double the scale after this many good steps")
      .add("shard_state", &O::shard_state, "shard the optimizer state over the replicas")
      .add("first_moment", &O::first_moment, "f32 or f16 storage of Adam/LAMB's first moment",
           [](const ConfigValue& v) {
             const std::string type = v.text();
             if (type != "f32" && type != "f16")
               v.fail(fmt::format(
                   "expected f32 or f16 (the second moment is always f32), got \"{}\"", type));
             return type == "f16" ? DType::f16 : DType::f32;
           });
  section.check = [](const ConfigValue& given, RunConfig& config) {
    if (given.has("learning_rate") && given.has("learning_rate_per_worker"))
      config.fail("optimizer.learning_rate_per_worker",
                  "give learning_rate (the job's rate) or learning_rate_per_worker (multiplied by "
                  "the replicas), not both");
    if (config.optimizer.schedule == "steps" && config.optimizer.step_list.empty())
      config.fail("optimizer.step_list", "required by schedule: steps");
  };
  return section;
}

}  // namespace polyhal::config_sections
