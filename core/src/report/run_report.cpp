#include "polyhal/app/run_report.hpp"

#include <sys/resource.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>

namespace polyhal {

std::string mib(std::uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

void print_memory(const MemoryReport& report) {
  std::cout << fmt::format("  memory on {}: {} of {} -> {}\n", report.device,
                           mib(report.required_bytes), mib(report.capacity_bytes),
                           report.fits ? "fits" : "DOES NOT FIT");
  // Columns as wide as their longest entry (an op name such as
  // sequence_conv_backward), up to a cap a long description runs past alone.
  std::size_t category_width = 0, name_width = 0;
  for (const auto& item : report.items) {
    category_width = std::max(category_width, item.category.size());
    if (item.name.size() <= 24) name_width = std::max(name_width, item.name.size());
  }
  for (const auto& item : report.items) {
    std::cout << fmt::format("    {:<{}} {:<{}} {:>10}\n", item.category, category_width, item.name,
                             name_width, mib(item.bytes));
  }
  for (const auto& note : report.notes) std::cout << "    note: " << note << '\n';
}

void report_peak_memory(const Device& device, const MemoryReport& plan, nlohmann::json& summary) {
  if (device.properties().mode == DeviceMode::model) return;
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return;
  const auto peak = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;  // Linux: KiB
  summary["peak_rss_bytes"] = peak;
  std::cout << fmt::format("  peak memory (measured, resident): {} (planned {})\n", mib(peak),
                           mib(plan.required_bytes));
}

PlanSummary fit_summary(const MemoryReport& memory) {
  return {fmt::format("{} of {} on {}: {}", mib(memory.required_bytes), mib(memory.capacity_bytes),
                      memory.device, memory.fits ? "fits" : "does not fit"),
          memory.fits};
}

std::string clock_text(double seconds) {
  const auto total = static_cast<long long>(seconds + 0.5);
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, (total / 60) % 60, total % 60);
}

namespace {

/// Why a device model gives no estimate: the figures its property table
/// marks as not published ("peak bf16 of Gaudi (HL-205) is not published").
std::string missing_figures(const DeviceProperties& p) {
  std::vector<std::string> missing;
  for (const auto& row : p.table)
    if (row.value.find("not published") != std::string::npos) missing.push_back(row.name);
  if (missing.empty())
    return fmt::format("the {} model prices some op of this workload at no rate", p.name);
  return fmt::format("the {} of {} {} not published, and the model does not invent {}",
                     fmt::join(missing, " and "), p.product, missing.size() == 1 ? "is" : "are",
                     missing.size() == 1 ? "it" : "them");
}

}  // namespace

void report_training_estimate(const std::optional<TrainingStepEstimate>& estimate,
                              const DeviceProperties& device, nlohmann::json& summary) {
  if (!estimate) {
    if (device.mode == DeviceMode::model)
      std::cout << "  no throughput estimate: " << missing_figures(device) << '\n';
    return;
  }
  const TrainingStepEstimate& e = *estimate;
  std::cout << fmt::format(
      "  estimated (device model, not measured): {:.1f} sequences/s; one optimizer step {:.2f} ms "
      "= forward {:.2f} + backward {:.2f} + optimizer {:.2f} + gradient all-reduce {:.2f}{}{} + "
      "host I/O {:.2f} ms\n",
      e.sequences_per_second, e.seconds() * 1e3, e.forward * 1e3, e.backward * 1e3,
      e.optimizer * 1e3, e.all_reduce * 1e3,
      e.all_reduce_hidden > 0
          ? fmt::format(" (and {:.2f} hidden behind backward)", e.all_reduce_hidden * 1e3)
          : "",
      e.pipeline_ramp > 0 ? fmt::format(" + pipeline ramp {:.2f}", e.pipeline_ramp * 1e3) : "",
      e.host_io * 1e3);
  summary["estimated_sequences_per_second"] = e.sequences_per_second;
  summary["estimated_step_seconds"] = {{"forward", e.forward},
                                       {"backward", e.backward},
                                       {"optimizer", e.optimizer},
                                       {"all_reduce", e.all_reduce},
                                       {"all_reduce_hidden", e.all_reduce_hidden},
                                       {"pipeline_ramp", e.pipeline_ramp},
                                       {"host_io", e.host_io},
                                       {"total", e.seconds()}};
}

nlohmann::json print_plan(const std::vector<PipelineStage>& stages,
                          const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                          std::int64_t layers, std::int64_t grad_accum) {
  nlohmann::json out = nlohmann::json::array();
  if (stages.empty()) {
    print_memory(memory);
    return out;
  }
  std::cout << fmt::format(
      "  pipeline: {} stages, 1F1B over grad_accum {} micro-batches; memory "
      "per stage (one device each):\n",
      stages.size(), grad_accum);
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& stage = stages[s];
    const auto& m = stage_memory[s];
    const std::int64_t last = stage.last_layer < 0 ? layers : stage.last_layer;
    std::cout << fmt::format("  stage {}: layers {}-{}{}{}\n", s, stage.first_layer, last - 1,
                             stage.embeddings ? " + embeddings" : "",
                             stage.heads ? " + heads" : "");
    print_memory(m);
    out.push_back({{"first_layer", stage.first_layer},
                   {"last_layer", last - 1},
                   {"memory_required_bytes", m.required_bytes},
                   {"fits", m.fits}});
  }
  return out;
}

}  // namespace polyhal
