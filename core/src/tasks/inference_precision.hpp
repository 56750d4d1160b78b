#pragma once
// model.precision for the tasks that run BertInference (inference, and the
// evaluation of squad and glue): int8 with its calibrated scales, bf32, and
// model.calibrate, which writes the scales an int8 run reads.
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// The precision `plan` resolved for `config`. int8 reads model.int8_scales for
/// `model`: static activations their steps (required), dynamic ones the
/// per-channel maxima they are smoothed with (optional); ConfigError naming
/// the key and file when it is missing, malformed or another model's, when a
/// dynamic run's file has no per-channel maxima, when model.int8_scales is
/// given to any other precision, or when model.calibrate is asked of an int8
/// run (calibrate at f32 or bf16).
/// int8's activations are the plan's (bf16 where `device` computes it
/// natively, else f32), so that a device without int8 refuses int8 itself,
/// with its reason. f16 on a device without f16 tensors (the CPU) is f32
/// tensors with f16 products in the encoder's linears (LinearMath::f16_products).
InferencePrecision inference_precision(const RunConfig& config, const PrecisionPlan& plan,
                                       const BertConfig& model, const Device& device);

[[noreturn]] void throw_precision_refused(const RunConfig& config, const KernelNotFoundError& e);

/// Runs `make` (which prepares a BertInference); a kernel the device refuses
/// for int8 or bf32 becomes a ConfigError naming model.precision and the
/// config file, with the device's reason.
template <class Make>
auto refusing_precision(const RunConfig& config, Make make) {
  try {
    return make();
  } catch (const KernelNotFoundError& e) {
    if (config.model.linear_math == LinearMath::native) throw;
    throw_precision_refused(config, e);
  }
}

/// int8 with model.int8_scales: ConfigError naming the key unless its scales
/// were calibrated on exactly these weights. Nothing otherwise.
void check_int8_weights(const RunConfig& config, const BertConfig& model, const TensorMap& weights);

/// model.calibrate: writes what `inference` recorded since
/// start_calibration() for `weights` (atomically), at the precision `plan`
/// ran, and logs where.
void write_calibration(const RunConfig& config, const PrecisionPlan& plan,
                       const BertInference& inference, const TensorMap& weights);

}  // namespace polyhal
