#pragma once
// The placement part of resolve_run (run_plan.hpp).
#include "polyhal/app/run_plan.hpp"

namespace polyhal {

/// batch.*, pipeline stages (model.pipeline*, device.ipus_per_replica),
/// replicas against `devices` and this host's CPUs, collective.overlap and
/// collective.plugin_engine; ConfigError naming file:line:key otherwise.
PlacementPlan resolve_placement(const RunConfig& config, const std::vector<Device*>& devices,
                                const DeviceOptions& device_options, const WorldShape& world);

}  // namespace polyhal
