// Task pretrain's schema: the common sections it reads and its `steps`.
#include "pretrain_section.hpp"

#include "polyhal/app/config_keys.hpp"

namespace polyhal {
namespace {

ConfigSection steps_section() {
  auto section = task_section<StepsSection>();
  section.shorthand = "steps";
  section.keys.push_back(ConfigKey{
      .path = "steps",
      .help = "optimizer steps to train",
      .read = [](const ConfigValue& v,
                 RunConfig& c) { c.section<StepsSection>().steps = v.integer(1); },
      .value = [](const RunConfig& c) { return config_text(c.section<StepsSection>().steps); }});
  return section;
}

}  // namespace

const TaskSchema& pretrain_schema() {
  static const TaskSchema schema{
      .name = "pretrain",
      .sections = {"model", "batch", "collective", "data", "optimizer", "checkpoint"},
      .required = {},
      .own = {std::make_shared<const ConfigSection>(steps_section())},
      .check = [](const RunConfig& config) {
        if (config.data.source == "text")
          config.fail("data.source", "pretrain reads generated or pattern data");
      }};
  return schema;
}

}  // namespace polyhal
