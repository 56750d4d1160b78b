#include "polyhal/app/run_outputs.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "polyhal/app/html_reports.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

void check_run_outputs(const RunOptions& run) {
  if (run.profile) {
    const auto file =
        run.profile_out.empty() ? std::filesystem::path("polyhal-trace.json") : run.profile_out;
    const auto dir = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error))
      throw ConfigError(fmt::format("--profile-out {}: the directory {} does not exist",
                                    file.string(), dir.string()));
    if (std::filesystem::is_directory(file, error))
      throw ConfigError(
          fmt::format("--profile-out {}: a directory; give the trace's file name", file.string()));
  }
  if (!run.report_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(run.report_dir, error);
    if (error || !std::filesystem::is_directory(run.report_dir))
      throw ConfigError(fmt::format("--report {}: cannot make this directory{}",
                                    run.report_dir.string(),
                                    error ? ": " + error.message() : " (a file is in the way)"));
  }
}

std::unique_ptr<StepTrace> make_step_trace(const Device& device, const RunOptions& run,
                                           const Communicator* world) {
  if (!run.profile) return nullptr;
  const auto& p = device.properties();
  const bool model = p.mode == DeviceMode::model;
  const int rank = world ? world->rank() : 0;
  auto trace = std::make_unique<StepTrace>(
      *run.profile, model ? StepTrace::Timeline::estimated : StepTrace::Timeline::measured, rank,
      fmt::format("polyhal {} on {}{}", run.config.filename().string(), p.name,
                  world ? fmt::format(" rank {}", rank) : ""));
  trace->set_metadata("device", p.name);
  trace->set_metadata("product", p.product);
  trace->set_metadata("config", run.config.string());
  return trace;
}

std::filesystem::path step_trace_file(const RunOptions& run, const Communicator* world) {
  std::filesystem::path file = run.profile_out.empty() ? "polyhal-trace.json" : run.profile_out;
  if (world && world->size() > 1) {
    auto name =
        file.stem().string() + fmt::format(".rank{}", world->rank()) + file.extension().string();
    file.replace_filename(name);
  }
  return file;
}

void write_step_trace(const StepTrace* trace, const RunOptions& run, const Communicator* world,
                      nlohmann::json& summary, std::string_view unit) {
  if (!trace) return;
  const auto file = step_trace_file(run, world);
  if (!trace->estimated() && trace->event_count() == 0)
    spdlog::warn("--profile {}:{}: the run has none of these {}; the trace is empty",
                 trace->window().first, trace->window().last, unit);
  trace->write(file);
  summary["trace"] = file.string();
  std::cout << fmt::format(
      "  trace of {} {}..{} ({}{} events): {} (open it in ui.perfetto.dev "
      "or chrome://tracing)\n",
      unit, trace->window().first, trace->window().last,
      trace->estimated() ? "estimated by the device model, " : "", trace->event_count(),
      file.string());
}

MemoryPage memory_page(const RunConfig& config, const Device& device,
                       const std::vector<PipelineStage>& stages,
                       const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                       std::int64_t layers, int replicas) {
  MemoryPage page;
  page.title = config.file.filename().string();
  page.device = device.properties();
  page.replicas = replicas;
  if (stages.empty() || stage_memory.size() != stages.size()) {
    page.parts.emplace_back(memory.device.empty() ? device.name() : memory.device, memory);
    return page;
  }
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const auto& stage = stages[s];
    const std::int64_t last = stage.last_layer < 0 ? layers : stage.last_layer;
    page.parts.emplace_back(
        fmt::format("{}: stage {}, layers {}-{}{}{}", stage_memory[s].device, s, stage.first_layer,
                    last - 1, stage.embeddings ? " + embeddings" : "",
                    stage.heads ? " + heads" : ""),
        stage_memory[s]);
  }
  return page;
}

void write_memory_report(const RunOptions& run, const RunConfig& config, const Device& device,
                         const std::vector<PipelineStage>& stages,
                         const std::vector<MemoryReport>& stage_memory, const MemoryReport& memory,
                         std::int64_t layers, int replicas, nlohmann::json& summary) {
  if (run.report_dir.empty()) return;
  MemoryPage page = memory_page(config, device, stages, stage_memory, memory, layers, replicas);
  if (summary.contains("peak_rss_bytes") && summary["peak_rss_bytes"].is_number_unsigned())
    page.measured_peak_bytes = summary["peak_rss_bytes"].get<std::uint64_t>();
  const auto file = run.report_dir / "memory.html";
  write_html_report(file, memory_report_html(page));
  summary["memory_report"] = file.string();
  std::cout << fmt::format("  memory report: {}\n", file.string());
}

}  // namespace polyhal
