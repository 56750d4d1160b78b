#pragma once
/// @file html_reports.hpp
/// Reports people look at: self-contained HTML pages (inline SVG charts, no
/// script, nothing fetched) for a run's metrics (`polyhal report`) and for
/// a memory plan (`run --compile-only --report DIR`, `validate --report DIR`).
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// One run's metrics (--metrics-out JSON lines).
struct RunMetrics {
  std::string label;  ///< what the page calls the run: the file's name
  std::filesystem::path file;
  std::vector<nlohmann::json> steps;        ///< {"event": "step"} records, in order
  std::vector<nlohmann::json> evaluations;  ///< other records with a step (eval, dev, ...)
  nlohmann::json summary;                   ///< the {"event": "summary"} record, or null
};

/// A metrics file of `polyhal run --metrics-out`, or every *.jsonl file in a
/// directory (a recipe's runs), in name order. Throws ConfigError naming the
/// file (and line) for a file that is missing, too large (more than 4 GiB,
/// or a line over 16 MiB), or a line that is not a JSON object.
std::vector<RunMetrics> read_run_metrics(const std::filesystem::path& file_or_directory);

/// The page of `runs`: a summary table, then loss, learning rate, loss
/// scale, gradient norm, throughput and every evaluation metric over the
/// steps; several runs overlay their curves. Long runs are thinned to at most
/// 2000 points per curve (the first, the last and evenly between).
std::string run_report_html(const std::vector<RunMetrics>& runs);

/// What a memory page shows: the plan of each device a replica uses (one per
/// pipeline stage, or one), for the device's kind.
struct MemoryPage {
  std::string title;  ///< the config
  DeviceProperties device;
  /// Per device of one replica: its label ("ipu1: stage 1, layers 5-11") and plan.
  std::vector<std::pair<std::string, MemoryReport>> parts;
  int replicas = 1;
  /// After a run on this host: the process's measured peak resident memory.
  std::optional<std::uint64_t> measured_peak_bytes;
};

/// The memory page: per device, what is always live (weights, gradients,
/// optimizer state), what lives through a step (activations, stashes), the
/// temporaries and the code, against the capacity; on the IPU model the same
/// per tile, and what Streaming Memory holds; on the CPU the plan next to
/// the measured peak.
std::string memory_report_html(const MemoryPage& page);

/// Writes `html` to `file` atomically (never half-written), creating its
/// directory. Throws RuntimeFailure naming the file.
void write_html_report(const std::filesystem::path& file, const std::string& html);

}  // namespace polyhal
