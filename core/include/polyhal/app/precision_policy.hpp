#pragma once
/// @file precision_policy.hpp
/// model.precision `mixed`: one config for every backend. It resolves, once
/// the device is open, to the device's fastest precision that keeps the
/// model's accuracy: bf16 where the device computes it natively (a CPU with
/// AVX512_BF16 or AMX, gaudi), else native f16 (ipu; optimizer.loss_scaling
/// auto is then dynamic), else f32 (a CPU whose bf16 would be emulated).
/// An explicit precision the device only emulates still runs, and says so
/// once, with the cost and the better choice.
#include <optional>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// What the policy decided, for the log (and config.model.precision_reason).
struct PrecisionDecision {
  std::string line;      ///< "model.precision mixed: f32 on cpu0 (...), as ..."
  bool warning = false;  ///< an explicit precision that runs emulated
};

/// Resolves model.precision mixed for `device` (sets config.model.precision)
/// and records why in config.model.precision_reason; nullopt when the config
/// asked for an explicit precision the device runs natively (or refuses: the
/// refusal comes when the run prepares it, naming the key).
std::optional<PrecisionDecision> resolve_precision_policy(RunConfig& config, const Device& device);

}  // namespace polyhal
