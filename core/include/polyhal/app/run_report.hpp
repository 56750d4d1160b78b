#pragma once
// Text the launcher's tasks print: sizes, memory plans, clocks.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/training_step.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// "12.3 MiB".
std::string mib(std::uint64_t bytes);
/// The plan, one line per item, and its notes.
void print_memory(const MemoryReport& report);
/// After a run on a device that is this host (not a device model): prints
/// the process's peak resident memory next to the plan and records it in
/// `summary` as peak_rss_bytes, so the plan can be checked against it.
void report_peak_memory(const Device& device, const MemoryReport& plan, nlohmann::json& summary);
/// "X MiB of Y MiB on dev: fits" (validate's one-line plan).
/// What `validate` prints of a plan, and whether it fits (exit 1 if not, as
/// `run --compile-only`).
struct PlanSummary {
  std::string text;
  bool fits = true;
};
PlanSummary fit_summary(const MemoryReport& memory);
/// The device model's training throughput and its parts, labelled as an
/// estimate; `summary` gets estimated_sequences_per_second and
/// estimated_step_seconds {forward, backward, optimizer, all_reduce,
/// pipeline_ramp}. A device model without an estimate says which published
/// figure it lacks; real hardware (measured instead) prints nothing.
void report_training_estimate(const std::optional<TrainingStepEstimate>& estimate,
                              const DeviceProperties& device, nlohmann::json& summary);
/// A pipeline's stages and each stage's plan (one device each), or the one
/// plan `memory` when `stages` is empty; returns the stages for the summary.
nlohmann::json print_plan(const std::vector<PipelineStage>& stages,
                          const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                          std::int64_t layers, std::int64_t grad_accum);
/// "h:mm:ss".
std::string clock_text(double seconds);

}  // namespace polyhal
