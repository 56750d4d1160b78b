// model.precision on the run's device. `mixed` is one config for every
// backend: bf16 where the device computes it natively (a CPU with
// AVX512_BF16 or AMX, gaudi), else native f16 (ipu; optimizer.loss_scaling
// auto is then dynamic), else f32 (a CPU whose bf16 would be emulated). An
// explicit precision the device only emulates still runs, and says so once,
// with the cost and the better choice.
#include <fmt/format.h>

#include <algorithm>

#include "polyhal/app/run_plan.hpp"

namespace polyhal {
namespace {

bool native(const DeviceProperties& p, const char* precision) {
  return precision_mode(p, precision).support == PrecisionSupport::native;
}

/// An explicit precision: native, or emulated with a warning naming the better choice.
void explicit_precision(const RunConfig& config, const Device& device, PrecisionPlan& plan) {
  const auto& p = device.properties();
  const PrecisionMode mode = precision_mode(p, plan.written);
  if (mode.support == PrecisionSupport::native) {
    plan.reason = fmt::format("as written; native on {}: {}", p.name, mode.why);
    return;
  }
  // A precision the device refuses is refused where the run prepares it, naming the key.
  if (mode.support == PrecisionSupport::none) return;
  const char* better = native(p, "bf16") ? "bf16" : "f32";
  plan.reason = fmt::format("as written; emulated on {}: {}", p.name, mode.why);
  plan.log_line = config
                      .error("model.precision",
                             fmt::format("{} runs emulated on {} ({}): {}; {} (or mixed, which "
                                         "picks it) computes natively here",
                                         plan.written, p.name, p.product, mode.why, better))
                      .what();
  plan.warning = true;
}

/// mixed: the device's fastest precision that keeps the model's accuracy.
void mixed_precision(const RunConfig& config, const Device& device, PrecisionPlan& plan) {
  const auto& p = device.properties();
  std::string why;
  if (native(p, "bf16")) {
    plan.activations = DType::bf16;
    why = fmt::format("it computes bf16 natively ({}): no loss scaling needed",
                      precision_mode(p, "bf16").why);
  } else if (native(p, "f16")) {
    plan.activations = DType::f16;
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
    plan.activations = DType::f32;
    const PrecisionMode bf16 = precision_mode(p, "bf16");
    why = bf16.support == PrecisionSupport::emulated
              ? fmt::format("its bf16 would be emulated ({})", bf16.why)
              : "it has neither native bf16 nor native f16";
  }
  plan.reason = "mixed, as " + why;
  plan.log_line = fmt::format("model.precision mixed: {} on {} ({}), as {}",
                              dtype_name(plan.activations), p.name, p.product, why);
}

}  // namespace

std::string PrecisionPlan::name() const {
  if (linear_math == LinearMath::int8) return "int8";
  if (linear_math == LinearMath::bf16_products) return "bf32";
  return std::string(dtype_name(activations));
}

LossScaler resolve_loss_scaling(const OptimizerSection& optimizer, DType activations) {
  const std::string& name = optimizer.loss_scaling;  // checked by the config reader
  const LossScaler::Mode mode = name == "static"    ? LossScaler::Mode::fixed
                                : name == "dynamic" ? LossScaler::Mode::dynamic
                                : name == "auto" && activations == DType::f16
                                    ? LossScaler::Mode::dynamic
                                    : LossScaler::Mode::none;
  return {mode, optimizer.loss_scale, optimizer.loss_scale_growth_interval};
}

PrecisionPlan resolve_precision(const RunConfig& config, const Device& device) {
  const ModelSection& m = config.model;
  PrecisionPlan plan;
  plan.written = m.precision_text();
  plan.linear_math = m.linear_math;
  plan.activations = m.written_dtype;
  if (m.mixed) {
    mixed_precision(config, device, plan);
  } else {
    explicit_precision(config, device, plan);
    // int8 keeps bf16 between its linears only where bf16 is native: emulated,
    // the conversions would cost more than int8 saves (VNNI without
    // AVX512_BF16: Cascade Lake).
    if (m.linear_math == LinearMath::int8 && !native(device.properties(), "bf16"))
      plan.activations = DType::f32;
  }
  plan.loss_scaler = resolve_loss_scaling(config.optimizer, plan.activations);
  return plan;
}

}  // namespace polyhal
