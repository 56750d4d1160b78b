#include "polyhal/app/precision_policy.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace polyhal {
namespace {

bool native(const DeviceProperties& p, const char* precision) {
  return precision_mode(p, precision).support == PrecisionSupport::native;
}

/// The explicit precision's line when the device only emulates it.
std::optional<PrecisionDecision> explicit_precision(RunConfig& config, const Device& device) {
  const auto& p = device.properties();
  const std::string name = config.model.precision_name();
  const PrecisionMode mode = precision_mode(p, name);
  if (mode.support == PrecisionSupport::native) {
    config.model.precision_reason = fmt::format("as written; native on {}: {}", p.name, mode.why);
    return std::nullopt;
  }
  if (mode.support == PrecisionSupport::none) return std::nullopt;
  const char* better = native(p, "bf16") ? "bf16" : "f32";
  config.model.precision_reason = fmt::format("as written; emulated on {}: {}", p.name, mode.why);
  return PrecisionDecision{
      fmt::format("{}: key 'model.precision': {} runs emulated on {} ({}): {}; {} (or mixed, "
                  "which picks it) computes natively here",
                  config.locate("model.precision"), name, p.name, p.product, mode.why, better),
      true};
}

}  // namespace

std::optional<PrecisionDecision> resolve_precision_policy(RunConfig& config, const Device& device) {
  if (!config.model.mixed) return explicit_precision(config, device);
  const auto& p = device.properties();
  std::string why;
  if (native(p, "bf16")) {
    config.model.precision = DType::bf16;
    why = fmt::format("it computes bf16 natively ({}): no loss scaling needed",
                      precision_mode(p, "bf16").why);
  } else if (native(p, "f16")) {
    config.model.precision = DType::f16;
    const auto& scaling = config.optimizer.loss_scaling;
    why = fmt::format("it has f16, not bf16; loss scaling {}",
                      scaling == "auto" ? fmt::format("dynamic from {:g} (optimizer.loss_scaling "
                                                      "auto)",
                                                      config.optimizer.loss_scale)
                                        : scaling + " (optimizer.loss_scaling)");
    // The IPU's matmul accumulation type, a device option of its own.
    const auto partials = std::find_if(p.table.begin(), p.table.end(),
                                       [](const Property& e) { return e.name == "partials"; });
    if (partials != p.table.end())
      why += fmt::format(", {} partials (device.{}.partials)", partials->value, p.backend);
  } else {
    config.model.precision = DType::f32;
    const PrecisionMode bf16 = precision_mode(p, "bf16");
    why = bf16.support == PrecisionSupport::emulated
              ? fmt::format("its bf16 would be emulated ({})", bf16.why)
              : "it has neither native bf16 nor native f16";
  }
  config.model.precision_reason = "mixed, as " + why;
  return PrecisionDecision{fmt::format("model.precision mixed: {} on {} ({}), as {}",
                                       dtype_name(config.model.precision), p.name, p.product, why),
                           false};
}

}  // namespace polyhal
