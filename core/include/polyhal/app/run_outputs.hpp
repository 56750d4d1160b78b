#pragma once
/// @file run_outputs.hpp
/// What `polyhal run` writes besides metrics, for every task alike: the step
/// trace of `--profile START:END [--profile-out FILE]` and the memory page
/// of `--report DIR`.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/step_trace.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/collective.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// Before any work: --profile-out's directory exists and --report's
/// directory exists or is made, so a long run does not end unable to write
/// them. Throws ConfigError naming the flag and the path.
void check_run_outputs(const RunOptions& run);

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
/// `unit`: what the window counts ("steps"; inference: "batches").
void write_step_trace(const StepTrace* trace, const RunOptions& run, const Communicator* world,
                      nlohmann::json& summary, std::string_view unit = "steps");

/// The memory page of a replica's plan: `stage_memory` per pipeline stage
/// (labelled with its device and layers), else `memory`.
MemoryPage memory_page(const RunConfig& config, const Device& device,
                       const std::vector<PipelineStage>& stages,
                       const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                       std::int64_t layers, int replicas);

/// --report DIR: writes DIR/memory.html (html_reports.hpp) of a replica's
/// plan: `stage_memory` per pipeline stage, else `memory`; with the measured
/// peak when `summary` has peak_rss_bytes (after a run on this host). Says
/// where on stdout and records it in `summary` as "memory_report".
void write_memory_report(const RunOptions& run, const RunConfig& config, const Device& device,
                         const std::vector<PipelineStage>& stages,
                         const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                         std::int64_t layers, int replicas, nlohmann::json& summary);

}  // namespace polyhal
