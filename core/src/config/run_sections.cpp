// The sections every kind of run shares: the top-level keys, log, batch,
// collective and checkpoint; and the list of all common sections.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "polyhal/app/config_keys.hpp"
#include "sections.hpp"

namespace polyhal {
namespace config_sections {

ConfigSection top_level() {
  ConfigSection top{.name = ""};
  top.keys = {
      {.path = "backend",
       .help = "required: the backend plugin to run on (cpu, ipu, gaudi, ...); --backend "
               "overrides it",
       .read = [](const ConfigValue& v, RunConfig& c) { c.backend = v.text(); },
       .value = [](const RunConfig& c) { return c.backend; }},
      {.path = "plugin_paths",
       .help = "directories searched for plugins first",
       .read =
           [](const ConfigValue& v, RunConfig& c) {
             if (!v.is_list()) v.fail("expected a list of directories");
             for (const auto& item : v.items()) c.plugin_paths.push_back(item.path());
           },
       .value =
           [](const RunConfig& c) {
             std::vector<std::string> dirs;
             for (const auto& p : c.plugin_paths) dirs.push_back(p.string());
             return fmt::format("[{}]", fmt::join(dirs, ", "));
           }},
      {.path = "allow_world_writable_plugins",
       .help = "refused: only the command line's --allow-world-writable-plugins may lower the "
               "plugin trust rules",
       // A config is input like any other file: it may not lower the trust
       // rules for the code we load.
       .read =
           [](const ConfigValue& v, RunConfig&) {
             v.fail(
                 "is accepted only on the command line (--allow-world-writable-plugins), never "
                 "from a config file");
           },
       .value = [](const RunConfig&) { return std::string("false"); }},
      {.path = "device",
       .help = "the backend's device options as a mapping, or each backend's under its name "
               "(device: {ipu: {partials: f16}, gaudi: {cards: 8}}: only the run's backend's "
               "apply); `polyhal devices --backend NAME --options` lists them",
       .read =
           [](const ConfigValue& v, RunConfig& c) {
             if (!v.is_map()) v.fail("expected a mapping of device options");
             for (const auto& name : v.names()) {
               // A mapping is one backend's options (options are scalars).
               if (v[name].is_map()) {
                 for (const auto& option : v[name].names())
                   c.device_for[name][option] = v[name][option].text();
               } else {
                 c.device[name] = v[name].text();
               }
             }
           },
       .value =
           [](const RunConfig& c) {
             std::vector<std::string> options;
             for (const auto& [name, value] : c.device) options.push_back(name + ": " + value);
             for (const auto& [backend, given] : c.device_for) {
               std::vector<std::string> own;
               for (const auto& [name, value] : given) own.push_back(name + ": " + value);
               options.push_back(fmt::format("{}: {{{}}}", backend, fmt::join(own, ", ")));
             }
             return fmt::format("{{{}}}", fmt::join(options, ", "));
           }},
      {.path = "task",
       .help = "required: the task to run (the table above)",
       .read = [](const ConfigValue& v, RunConfig& c) { c.task = v.text(); },
       .value = [](const RunConfig& c) { return c.task; }},
  };
  return top;
}

ConfigSection log() {
  ConfigSection section{.name = "log"};
  const auto of = [](RunConfig& c) -> RunConfig& { return c; };
  SectionKeys<RunConfig> keys(section, of);
  keys.add(
          "level", &RunConfig::log_level, "trace, debug, info, warn, error or off",
          [](const ConfigValue& v) {
            static const std::vector<std::string> levels{"trace", "debug", "info",
                                                         "warn",  "error", "off"};
            std::string level = v.text();
            if (std::find(levels.begin(), levels.end(), level) == levels.end())
              v.fail(fmt::format("expected one of {}, got \"{}\"", fmt::join(levels, ", "), level));
            return level;
          })
      .add("file", &RunConfig::log_file, "also append log lines to this file", {},
           {.output = OutputPath::file})
      .add("every", &RunConfig::log_every, "a progress line every this many steps");
  return section;
}

ConfigSection batch() {
  ConfigSection section{.name = "batch"};
  SectionKeys<BatchSection> keys(
      section, [](RunConfig & c) -> auto& { return c.batch; });
  keys.add("micro", &BatchSection::micro, "sequences per micro-batch")
      .add("grad_accum", &BatchSection::grad_accum, "micro-batches per optimizer step", {},
           {.traits = {TaskTrait::trains}})
      .add("replicas", &BatchSection::replicas,
           "data-parallel replicas (global batch = replicas x grad_accum x micro)");
  return section;
}

ConfigSection collective() {
  ConfigSection section{.name = "collective", .shorthand = "engine"};
  SectionKeys<CollectiveSection> keys(
      section, [](RunConfig & c) -> auto& { return c.collective; });
  keys.add("engine", &CollectiveSection::engine,
           "local (replicas as threads) or mpi (one rank per replica, under mpirun); "
           "`collective: mpi` is short for it",
           one_of({"local", "mpi"}))
      .add("timeout_seconds", &CollectiveSection::timeout_seconds,
           "longest wait in one collective before a rank is declared lost (exit 4)", seconds())
      .add("overlap", &CollectiveSection::overlap,
           "all-reduce the gradients in buckets while the last micro-batch's backward runs, as "
           "PyTorch DDP does: true, false, or auto (when the MPI ranks span several hosts; on one "
           "host the reduction's copies compete with backward for the cores). Same values either "
           "way; a pipeline reduces after its schedule",
           {}, {.traits = {TaskTrait::trains}})
      .add("bucket_mb", &CollectiveSection::bucket_mb,
           "MiB of gradients per overlapped bucket (DDP's bucket_cap_mb)", at_least(1, 4096),
           {.traits = {TaskTrait::trains}})
      .add("plugin_engine", &CollectiveSection::plugin_engine,
           "the backend's own collective engine (the IPU and Gaudi models' links): auto (offer "
           "it every collective when the backend has one; what it refuses runs on the engine "
           "above), off (polyhal's engine only), or required (an error when the backend has none)",
           one_of({"auto", "off", "required"}), {.traits = {TaskTrait::trains}});
  return section;
}

ConfigSection checkpoint() {
  ConfigSection section{.name = "checkpoint"};
  SectionKeys<CheckpointSection> keys(
      section, [](RunConfig & c) -> auto& { return c.checkpoint; },
      std::vector<TaskTrait>{TaskTrait::trains});
  keys.add("dir", &CheckpointSection::dir, "write checkpoints here (none when unset)", {},
           {.output = OutputPath::directory})
      .add("every", &CheckpointSection::every, "a checkpoint every this many steps, and at the end")
      .add("every_samples", &CheckpointSection::every_samples,
           "a checkpoint each time the samples trained pass a multiple of this (Intel's "
           "num_samples_per_checkpoint); 0: off",
           at_least(0))
      .add("start_after_samples", &CheckpointSection::start_after_samples,
           "no scheduled checkpoint before this many samples (Intel's "
           "min_samples_to_start_checkpoints); the end always saves",
           at_least(0))
      .add("keep_last", &CheckpointSection::keep_last,
           "keep only the newest N checkpoints in dir, removing older ones once a new one is "
           "whole (a BERT-Large one is about 4 GB); 0: keep them all",
           at_least(0))
      .add("resume", &CheckpointSection::resume, "continue from the newest checkpoint in dir")
      .add("init", &CheckpointSection::init,
           "start from these weights (phase 2 from phase 1; fine-tuning from a pre-trained "
           "model)",
           {}, {.input = InputPath::checkpoint});
  return section;
}

}  // namespace config_sections

const std::vector<ConfigSection>& common_config_sections() {
  namespace s = config_sections;
  static const std::vector<ConfigSection> sections{s::top_level(), s::log(),        s::model(),
                                                   s::batch(),     s::collective(), s::data(),
                                                   s::optimizer(), s::checkpoint()};
  return sections;
}

}  // namespace polyhal
