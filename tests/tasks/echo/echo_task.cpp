// Task `echo`: a task that lives in this folder alone (its config section,
// its schema, its plan, its run and its report) and registers itself, to
// show that adding a task needs no edit anywhere else. It writes a message
// a number of times to stdout and, when `echo.output` is given, to a file.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

struct EchoSection {
  static constexpr const char* kSection = "echo";
  std::string message;
  std::int64_t times = 1;
  std::filesystem::path output;
};

ConfigSection echo_section() {
  auto section = task_section<EchoSection>();
  SectionKeys<EchoSection> keys(section, task_section_of<EchoSection>);
  keys.add("message", &EchoSection::message, "required: the line to write")
      .add("times", &EchoSection::times, "how many times to write it", at_least(1, 1000))
      .add("output", &EchoSection::output, "also write the lines to this file", {},
           {.output = OutputPath::file});
  section.check = [](const ConfigValue& given, RunConfig& config) {
    if (!given.has("message")) config.fail("echo.message", "required: the line to write");
  };
  return section;
}

const TaskSchema& echo_schema() {
  static const TaskSchema schema{.name = "echo",
                                 .sections = {"model"},
                                 .required = {"echo"},
                                 .own = {std::make_shared<const ConfigSection>(echo_section())},
                                 .check = [](const RunConfig& config) {
                                   if (config.model.seq_len < 8)
                                     config.fail("model.seq_len",
                                                 "echo needs at least 8 (a line per token)");
                                 }};
  return schema;
}

class EchoTask final : public Task {
 public:
  const TaskSchema& schema() const override { return echo_schema(); }
  PlanSummary plan(const TaskContext& context) const override {
    const auto& echo = context.config.section<EchoSection>();
    return {fmt::format("{} line(s) of {} bytes", echo.times, echo.message.size() + 1), true};
  }
  int run(const TaskContext& context) const override {
    const RunConfig& config = context.config;
    const RunOptions& run = context.options;
    const auto& echo = config.section<EchoSection>();
    std::string text;
    for (std::int64_t i = 0; i < echo.times; ++i) text += echo.message + "\n";
    std::cout << text;
    if (!echo.output.empty() && !run.compile_only) {
      std::ofstream(echo.output) << text;
    }
    context.metrics.write_summary({{"task", config.task},
                                   {"device", context.device.name()},
                                   {"lines", echo.times},
                                   {"compile_only", run.compile_only}});
    return 0;
  }
};

const TaskRegistration registered{[] { return std::make_unique<EchoTask>(); }};

}  // namespace
}  // namespace polyhal
