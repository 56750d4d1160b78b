// polyhal report: runs' metrics as one HTML page.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

namespace {

/// --chain: each run's steps (and evaluations) after the last step of the
/// runs before it, so a recipe's stages read as one training.
void chain_steps(std::vector<RunMetrics>& runs) {
  std::int64_t offset = 0;
  for (auto& run : runs) {
    std::int64_t last = 0;
    for (auto* records : {&run.steps, &run.evaluations})
      for (auto& record : *records)
        if (record.contains("step") && record["step"].is_number_integer()) {
          last = std::max(last, record["step"].get<std::int64_t>());
          record["step"] = record["step"].get<std::int64_t>() + offset;
        }
    offset += last;
  }
}

}  // namespace

int write_run_report(const std::vector<std::string>& inputs, const std::filesystem::path& output,
                     bool chain) {
  std::vector<RunMetrics> runs;
  for (const auto& input : inputs)
    for (auto& run : read_run_metrics(input)) runs.push_back(std::move(run));
  if (chain) chain_steps(runs);
  // Two files of one name in different directories: tell them apart.
  for (std::size_t i = 0; i < runs.size(); ++i)
    for (std::size_t j = i + 1; j < runs.size(); ++j)
      if (runs[i].label == runs[j].label) {
        runs[i].label = runs[i].file.string();
        runs[j].label = runs[j].file.string();
      }
  std::size_t steps = 0;
  for (const auto& r : runs) steps += r.steps.size();
  write_html_report(output, run_report_html(runs));
  std::cout << fmt::format("report of {} run{} ({} steps): {}\n", runs.size(),
                           runs.size() == 1 ? "" : "s", steps, output.string());
  return 0;
}

int report_command(CommandLine& cl, int, char**) {
  if (cl.inputs.empty())
    throw UsageError(
        fmt::format("'report' needs a metrics file (run --metrics-out) or a directory of them\n{}",
                    command_help("report")));
  return write_run_report(
      cl.inputs, cl.pack.output.empty() ? "polyhal-report.html" : cl.pack.output, cl.chain);
}

}  // namespace polyhal
