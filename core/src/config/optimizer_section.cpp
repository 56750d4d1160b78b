// Config section `optimizer`: the update rule, its learning-rate schedule,
// clipping, loss scaling and state sharding.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "polyhal/app/config_keys.hpp"
#include "sections.hpp"

namespace polyhal::config_sections {

ConfigSection optimizer() {
  ConfigSection section{.name = "optimizer"};
  using O = OptimizerSection;
  SectionKeys<O> keys(
      section, [](RunConfig & c) -> auto& { return c.optimizer; }, kTrainingTasks);
  keys.add("name", &O::name, "lamb, adamw or sgd", one_of({"lamb", "adamw", "sgd"}))
      .add("learning_rate", &O::learning_rate, "peak learning rate")
      .add("beta1", &O::beta1, "Adam/LAMB first moment decay")
      .add("beta2", &O::beta2, "Adam/LAMB second moment decay")
      .add("epsilon", &O::epsilon, "Adam/LAMB epsilon")
      .add("weight_decay", &O::weight_decay, "decoupled weight decay (not on biases and LayerNorm)")
      .add("momentum", &O::momentum, "sgd momentum")
      .add("warmup_steps", &O::warmup_steps, "linear warm-up steps", at_least(0))
      .add("schedule", &O::schedule, "polynomial, exponential, steps or constant",
           one_of({"polynomial", "exponential", "steps", "constant"}))
      .add("power", &O::power, "polynomial decay power")
      .add("end_learning_rate", &O::end_learning_rate,
           "polynomial: the learning rate at the last step")
      .add("decay_rate", &O::decay_rate, "exponential: lr x decay_rate^(step/decay_steps)")
      .add("decay_steps", &O::decay_steps, "exponential: see decay_rate")
      .custom(
          "step_list", "steps schedule: [[from_step, learning_rate], ...]",
          [](const ConfigValue& v, O& o) {
            if (!v.is_list()) v.fail("expected a list of [from_step, learning_rate]");
            for (const auto& entry : v.items()) {
              const auto pair = entry.items();
              if (!entry.is_list() || pair.size() != 2)
                v.fail("expected a list of [from_step, learning_rate]");
              o.step_list.emplace_back(pair[0].integer(0), pair[1].number());
            }
          },
          [](const O& o) {
            std::vector<std::string> steps;
            for (const auto& [from, lr] : o.step_list)
              steps.push_back(fmt::format("[{}, {}]", from, lr));
            return fmt::format("[{}]", fmt::join(steps, ", "));
          })
      .add("max_grad_norm", &O::max_grad_norm, "clip the global gradient norm (0: off)")
      .add("loss_scaling", &O::loss_scaling, "auto (dynamic for f16), static, dynamic or none",
           one_of({"auto", "none", "static", "dynamic"}))
      .add("loss_scale", &O::loss_scale, "the static scale, or the dynamic one's start")
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
  section.check = [](const ConfigValue&, RunConfig& config) {
    if (config.optimizer.schedule == "steps" && config.optimizer.step_list.empty())
      config.fail("optimizer.step_list", "required by schedule: steps");
  };
  return section;
}

}  // namespace polyhal::config_sections
