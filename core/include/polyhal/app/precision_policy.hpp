#pragma once
/// @file precision_policy.hpp
/// model.precision `mixed`: one config for every backend. It resolves, once
/// the device is open, to the device's native low precision: bf16 where the
/// device computes in it (cpu, gaudi), else f16 (ipu; optimizer.loss_scaling
/// auto is then dynamic), else f32. Explicit precisions keep their checks.
#include <optional>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// Resolves model.precision mixed for `device` (sets config.model.precision)
/// and returns the line that reports the choice; nullopt when the config
/// asked for an explicit precision.
std::optional<std::string> resolve_precision_policy(RunConfig& config, const Device& device);

}  // namespace polyhal
