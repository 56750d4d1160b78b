#include "tasks/inference_precision.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "polyhal/app/int8_scales.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

constexpr const char* kScalesKey = "model.int8_scales";

bool static_int8(const RunConfig& config) {
  return config.model.linear_math == LinearMath::int8 && config.model.int8_activations == "static";
}

/// Dynamic int8 given a scales file: smoothed by its per-channel maxima.
bool smoothed_int8(const RunConfig& config) {
  return config.model.linear_math == LinearMath::int8 &&
         config.model.int8_activations == "dynamic" && !config.model.int8_scales.empty();
}

Int8Scales read_configured_scales(const RunConfig& config, const BertConfig& model) {
  if (config.model.int8_scales.empty())
    throw config.error(
        "model.int8_activations",
        "static needs model.int8_scales, the scales a "
        "calibration run wrote (run once with model.calibrate: scales.json at f32, docs/bert.md "
        "\"INT8\")");
  return read_int8_scales(config.model.int8_scales, model, kScalesKey);
}

}  // namespace

void throw_precision_refused(const RunConfig& config, const KernelNotFoundError& e) {
  throw config.error("model.precision", fmt::format("{} cannot run here: {}",
                                                    config.model.precision_text(), e.what()));
}

InferencePrecision inference_precision(const RunConfig& config, const PrecisionPlan& plan,
                                       const BertConfig& model, const Device& device) {
  InferencePrecision precision(plan.activations);
  precision.encoder_math = plan.linear_math;
  if (plan.activations == DType::f16 && !device.supports(DType::f16) &&
      device.supports(DType::f32)) {
    // A CPU keeps f16 as Intel's scripts run it (autocast to float16): the
    // encoder's linears multiply f16 operands, everything else stays f32.
    // A device that refuses f16 products says why at prepare.
    precision.dtype = DType::f32;
    precision.encoder_math = LinearMath::f16_products;
    spdlog::info(
        "model.precision f16 on {}: f16 products in the encoder's linears, f32 tensors "
        "(the device keeps no f16 tensors)",
        device.name());
  }
  if (!device.supports(precision.dtype))
    throw config.error(
        "model.precision",
        fmt::format("{} does not compute in {}; set model.precision: mixed to run "
                    "one config on every backend (it picks each device's own low precision)",
                    device.name(), dtype_name(precision.dtype)));
  const bool int8 = config.model.linear_math == LinearMath::int8;
  if (!int8 && !config.model.int8_scales.empty())
    throw config.error(kScalesKey,
                       fmt::format("read by model.precision int8 only, not {}", plan.name()));
  if (int8 && !config.model.calibrate.empty())
    throw config.error("model.calibrate",
                       "calibrate at f32 (or bf16), not int8: the scales measure the "
                       "unquantised model");
  if (static_int8(config)) precision.int8_max_abs = read_configured_scales(config, model).max_abs;
  if (smoothed_int8(config)) {
    precision.int8_channel_max_abs = read_configured_scales(config, model).channel_max_abs;
    if (precision.int8_channel_max_abs.empty())
      throw config.error(
          kScalesKey,
          fmt::format(
              "{} has no per-channel maxima, which dynamic int8 smooths with; "
              "calibrate again with model.calibrate (or set model.int8_activations: static)",
              config.model.int8_scales.string()));
  }
  return precision;
}

void check_int8_weights(const RunConfig& config, const BertConfig& model,
                        const TensorMap& weights) {
  if (!static_int8(config) && !smoothed_int8(config)) return;
  check_int8_fingerprint(read_configured_scales(config, model), model_fingerprint(weights),
                         config.model.int8_scales, kScalesKey);
}

void write_calibration(const RunConfig& config, const PrecisionPlan& plan,
                       const BertInference& inference, const TensorMap& weights) {
  Int8Scales scales;
  scales.fingerprint = model_fingerprint(weights);
  scales.batches = inference.calibrated_batches();
  scales.precision = plan.name();
  scales.max_abs = inference.calibrated_max_abs();
  scales.channel_max_abs = inference.calibrated_channel_max_abs();
  if (scales.batches < 1)
    throw config.error("model.calibrate", "the run ran no batch to calibrate on");
  write_int8_scales(config.model.calibrate, inference.config(), scales);
  spdlog::info("int8 scales of {} linears from {} batch(es) written to {}", scales.max_abs.size(),
               scales.batches, config.model.calibrate.string());
}

}  // namespace polyhal
