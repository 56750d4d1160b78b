// polyhal report: runs' metrics as one HTML page.
#include <fmt/format.h>

#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

int write_run_report(const std::vector<std::string>& inputs, const std::filesystem::path& output) {
  std::vector<RunMetrics> runs;
  for (const auto& input : inputs)
    for (auto& run : read_run_metrics(input)) runs.push_back(std::move(run));
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
  return write_run_report(cl.inputs,
                          cl.pack.output.empty() ? "polyhal-report.html" : cl.pack.output);
}

}  // namespace polyhal
