#pragma once
// The weights a run starts from against the dimensions it was given,
// compared from the weights file's header before anything is loaded.
#include "polyhal/app/run_plan.hpp"

namespace polyhal {

/// Refuses weights whose header shows other dimensions than the plan's (a
/// preset over a model directory's config.json, say): one error at the key
/// that names the weights, listing each dimension both ways and the key to
/// set, instead of a problem per tensor when they load. Safetensors files
/// only; anything else is checked as it loads.
void check_weights_fit(const RunConfig& config, const ModelPlan& model);

}  // namespace polyhal
