#include "tasks/inference_precision.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "polyhal/app/int8_scales.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
void check_int8_weights(const RunConfig& config, const PrecisionPlan& plan,
                        const TensorMap& weights) {
  if (!plan.int8_scales) return;
  check_int8_fingerprint(*plan.int8_scales, model_fingerprint(weights), config.model.int8_scales,
                         "model.int8_scales");
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
