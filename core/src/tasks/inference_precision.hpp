#pragma once
// model.precision for the tasks that run BertInference (inference, and the
// evaluation of squad and glue), beyond what the plan decided
// (run_plan.hpp: PrecisionPlan::inference, inference_precision): a kernel the
// device refuses at prepare, int8 scales against the loaded weights, and
// model.calibrate, which writes the scales an int8 run reads.
#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

/// int8 with model.int8_scales: ConfigError naming the key unless the
/// scales the plan read were calibrated on exactly these weights. Nothing
/// otherwise.
void check_int8_weights(const RunConfig& config, const PrecisionPlan& plan,
                        const TensorMap& weights);

/// model.calibrate: writes what `inference` recorded since
/// start_calibration() for `weights` (atomically), at the precision `plan`
/// ran, and logs where.
void write_calibration(const RunConfig& config, const PrecisionPlan& plan,
                       const BertInference& inference, const TensorMap& weights);

}  // namespace polyhal
