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

constexpr const char* kScalesKey = "model.int8_scales";

/// int8's keys: the scales file read once (static: required, dynamic: its
/// per-channel maxima), and the keys int8 refuses or only int8 reads.
void int8_inference(const RunConfig& config, const ModelPlan& model, PrecisionPlan& plan) {
  const ModelSection& m = config.model;
  const bool int8 = m.linear_math == LinearMath::int8;
  if (!int8 && !m.int8_scales.empty())
    throw config.error(kScalesKey,
                       fmt::format("read by model.precision int8 only, not {}", plan.name()));
  if (int8 && !m.calibrate.empty())
    throw config.error("model.calibrate",
                       "calibrate at f32 (or bf16), not int8: the scales measure the "
                       "unquantised model");
  if (!int8) return;
  const bool dynamic = m.int8_activations == "dynamic";
  if (m.int8_scales.empty()) {
    if (dynamic) return;  // quantises each row at run time, unsmoothed
    throw config.error(
        "model.int8_activations",
        "static needs model.int8_scales, the scales a "
        "calibration run wrote (run once with model.calibrate: scales.json at f32, docs/bert.md "
        "\"INT8\")");
  }
  plan.int8_scales = read_int8_scales(m.int8_scales, model.dims, kScalesKey);
  if (!dynamic) {
    plan.inference.int8_max_abs = plan.int8_scales->max_abs;
    return;
  }
  plan.inference.int8_channel_max_abs = plan.int8_scales->channel_max_abs;
  if (plan.inference.int8_channel_max_abs.empty())
    throw config.error(
        kScalesKey,
        fmt::format("{} has no per-channel maxima, which dynamic int8 smooths with; "
                    "calibrate again with model.calibrate (or set model.int8_activations: static)",
                    m.int8_scales.string()));
}

/// What BertInference computes in on `device`, and why it cannot.
void inference_precision_on(const Device& device, PrecisionPlan& plan) {
  plan.inference = InferencePrecision(plan.activations);
  plan.inference.encoder_math = plan.linear_math;
  if (plan.activations == DType::f16 && !device.supports(DType::f16) &&
      device.supports(DType::f32)) {
    // A CPU keeps f16 as Intel's scripts run it (autocast to float16): the
    // encoder's linears multiply f16 operands, everything else stays f32.
    // A device that refuses f16 products says why at prepare.
    plan.inference.dtype = DType::f32;
    plan.inference.encoder_math = LinearMath::f16_products;
    const std::string line = fmt::format(
        "model.precision f16 on {}: f16 products in the encoder's linears, f32 tensors "
        "(the device keeps no f16 tensors)",
        device.name());
    plan.log_line = plan.log_line.empty() ? line : plan.log_line + "; " + line;
  }
  if (!device.supports(plan.inference.dtype))
    plan.inference_refusal = fmt::format(
        "{} does not compute in {}; set model.precision: mixed to run "
        "one config on every backend (it picks each device's own low precision)",
        device.name(), dtype_name(plan.inference.dtype));
}

/// Why `device` cannot train in the plan's precision ("" when it can).
std::string training_refusal_on(const Device& device, const PrecisionPlan& plan) {
  // bf32 trains: f32 tensors, the dense layers' products in bf16.
  if (plan.linear_math != LinearMath::native && plan.linear_math != LinearMath::bf16_products)
    return fmt::format(
        "{} is for inference and evaluation (fine-tuning with do: eval); train in bf16, bf32 or "
        "f32",
        plan.name());
  if (plan.linear_math == LinearMath::bf16_products && !device.supports(DType::bf16))
    return fmt::format(
        "bf32 trains with bf16 products, and {} does not compute in bf16{}; train in f32 (or "
        "mixed, which picks what computes natively here)",
        device.name(),
        device.properties().mode == DeviceMode::model
            ? ""
            : " at this device.isa (bf16 needs avx512_core or above)");
  if (device.supports(plan.activations)) return {};
  return fmt::format(
      "{} does not compute in {}{}{}", device.name(), dtype_name(plan.activations),
      plan.activations == DType::bf16 ? " (the IPU has f16 and f32: use f16 with loss scaling)"
                                      : " (use bf16 or f32)",
      "; model.precision: mixed runs one config on every backend (bf16 on cpu and gaudi, f16 "
      "with dynamic loss scaling on ipu)");
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

PrecisionPlan resolve_precision(const RunConfig& config, const Device& device,
                                const ModelPlan& model) {
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
  const auto& schema = config.schema;
  if (schema != nullptr && schema->has(TaskTrait::trains))
    plan.training_refusal = training_refusal_on(device, plan);
  if (schema != nullptr && schema->has(TaskTrait::takes_int8)) {
    inference_precision_on(device, plan);
    int8_inference(config, model, plan);
  }
  return plan;
}

const InferencePrecision& inference_precision(const RunConfig& config, const PrecisionPlan& plan) {
  if (!plan.inference_refusal.empty())
    throw config.error("model.precision", plan.inference_refusal);
  return plan.inference;
}

void throw_precision_refused(const RunConfig& config, const KernelNotFoundError& e) {
  throw config.error("model.precision", fmt::format("{} cannot run here: {}",
                                                    config.model.precision_text(), e.what()));
}

void refuse_untrainable_precision(const RunConfig& config, const PrecisionPlan& plan) {
  if (!plan.training_refusal.empty()) throw config.error("model.precision", plan.training_refusal);
}

}  // namespace polyhal
