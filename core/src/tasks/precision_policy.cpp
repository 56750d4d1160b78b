#include "polyhal/app/precision_policy.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace polyhal {

std::optional<std::string> resolve_precision_policy(RunConfig& config, const Device& device) {
  if (!config.model.mixed) return std::nullopt;
  const auto& p = device.properties();
  std::string why;
  if (device.supports(DType::bf16)) {
    config.model.precision = DType::bf16;
    why = "it computes in bf16: no loss scaling needed";
  } else if (device.supports(DType::f16)) {
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
    why = "it has neither bf16 nor f16";
  }
  return fmt::format("model.precision mixed: {} on {} ({}), as {}",
                     dtype_name(config.model.precision), p.name, p.product, why);
}

}  // namespace polyhal
