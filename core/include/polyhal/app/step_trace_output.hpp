#pragma once
/// @file step_trace_output.hpp
/// `polyhal run --profile START:END [--profile-out FILE]` for the training
/// tasks: which trace a run makes and where it goes.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// The trace --profile asks for, or nullptr without it: measured on a
/// device that is this host, the model's estimated timeline on a device
/// model. `world`: the MPI communicator (its rank is the trace's process).
std::unique_ptr<StepTrace> make_step_trace(const Device& device, const RunOptions& run,
                                           const Communicator* world);

/// Where this process writes its trace: --profile-out (default
/// polyhal-trace.json), with ".rankN" before the extension when several
/// MPI ranks each write one.
std::filesystem::path step_trace_file(const RunOptions& run, const Communicator* world);

/// Writes `trace` (when there is one) atomically, says where on stdout and
/// records the file in `summary` as "trace"; warns when a measured window
/// held no step of the run.
void write_step_trace(const StepTrace* trace, const RunOptions& run, const Communicator* world,
                      nlohmann::json& summary);

}  // namespace polyhal
