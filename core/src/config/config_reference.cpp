// What is made from the key declarations (polyhal/app/config_keys.hpp): the
// reference page, `config show`, and the readers keys share.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "polyhal/app/config_keys.hpp"

namespace polyhal {

ReadAs<std::int64_t> at_least(std::int64_t min, std::int64_t max) {
  return [min, max](const ConfigValue& v) { return v.integer(min, max); };
}

ReadAs<int> repeats(std::int64_t min) {
  return [min](const ConfigValue& v) { return static_cast<int>(v.integer(min, kMaxRepeats)); };
}

ReadAs<std::string> one_of(std::vector<std::string> choices) {
  return [choices = std::move(choices)](const ConfigValue& v) { return v.one_of(choices); };
}

ReadAs<double> seconds() {
  return [](const ConfigValue& v) {
    const double value = v.number();
    if (!(value > 0) || value > kMaxSeconds)
      v.fail(fmt::format("expected a positive number of seconds up to {:g}, got {}", kMaxSeconds,
                         value));
    return value;
  };
}

std::string config_text(const std::filesystem::path& p) {
  return p.string();
}
std::string config_text(const std::string& s) {
  return s;
}
std::string config_text(bool b) {
  return b ? "true" : "false";
}
std::string config_text(double d) {
  return fmt::format("{}", d);
}
std::string config_text(std::int64_t i) {
  return std::to_string(i);
}
std::string config_text(int i) {
  return std::to_string(i);
}
std::string config_text(std::uint64_t i) {
  return std::to_string(i);
}
std::string config_text(DType t) {
  return std::string(dtype_name(t));
}

std::string config_text(TriState t) {
  return std::string(tri_state_text(t));
}

namespace {

/// The sections `tasks` read, common first, each once.
std::vector<const ConfigSection*> sections_of(const std::vector<TaskSchema>& tasks) {
  std::vector<const ConfigSection*> sections;
  for (const auto& section : common_config_sections()) sections.push_back(&section);
  for (const auto& schema : tasks)
    for (const auto& section : schema.own)
      if (std::none_of(sections.begin(), sections.end(),
                       [&](const ConfigSection* s) { return s->name == section->name; }))
        sections.push_back(section.get());
  return sections;
}

/// Sections every task reads: the top-level keys and log.
bool read_by_every_task(const ConfigSection& section) {
  return section.name.empty() || section.name == "log";
}

}  // namespace

bool key_applies(const ConfigKey& key, const TaskSchema& schema) {
  if (key.traits.empty() && key.tasks.empty()) return true;
  return std::find(key.tasks.begin(), key.tasks.end(), schema.name) != key.tasks.end() ||
         std::any_of(key.traits.begin(), key.traits.end(),
                     [&](TaskTrait trait) { return schema.has(trait); });
}

std::vector<const ConfigKey*> task_keys(const TaskSchema& schema) {
  std::vector<const ConfigKey*> keys;
  for (const auto* section : sections_of({schema})) {
    if (!read_by_every_task(*section) && !schema.reads(section->name)) continue;
    for (const auto& key : section->keys)
      if (key_applies(key, schema)) keys.push_back(&key);
  }
  return keys;
}

std::vector<const ConfigKey*> config_keys(const std::vector<TaskSchema>& tasks) {
  std::vector<const ConfigKey*> keys;
  for (const auto* section : sections_of(tasks))
    for (const auto& key : section->keys) keys.push_back(&key);
  return keys;
}

std::string config_reference_markdown(const std::vector<TaskSchema>& tasks) {
  std::string out =
      "# Config reference\n\n"
      "Generated from the key declarations (the common sections in core/src/config/, each\n"
      "task's own in its folder under core/src/tasks/) by `polyhal config reference`; a test\n"
      "fails when this file and the declarations differ.\n"
      "Relative paths are relative to the current directory (docs/config.md, \"Paths\").\n"
      "Device options (`device.*`) belong to each backend: `polyhal devices --backend NAME "
      "--options`.\n\n"
      "| task | sections it reads (besides backend, plugin_paths, device, task, log) |\n"
      "|---|---|\n";
  for (const auto& schema : tasks) {
    std::vector<std::string> read = schema.sections;
    for (const auto& section : schema.own) read.push_back(section->name);
    std::vector<std::string> marked;
    for (const auto& name : read) {
      const bool required =
          std::find(schema.required.begin(), schema.required.end(), name) != schema.required.end();
      marked.push_back(fmt::format("`{}`{}", name, required ? " (required)" : ""));
    }
    out += fmt::format("| `{}` | {} |\n", schema.name, fmt::join(marked, ", "));
  }
  out += "\n| key | default | tasks | what it does |\n|---|---|---|---|\n";
  RunConfig defaults;
  for (const auto& schema : tasks)
    for (const auto& section : schema.own)
      if (section->add_defaults) section->add_defaults(defaults);
  for (const auto* section : sections_of(tasks)) {
    std::vector<std::string> readers;
    for (const auto& schema : tasks)
      if (schema.reads(section->name)) readers.push_back(schema.name);
    for (const auto& key : section->keys) {
      const std::string value = key.value(defaults);
      std::vector<std::string> named;
      for (const auto& schema : tasks)
        if (schema.reads(section->name) && key_applies(key, schema)) named.push_back(schema.name);
      const std::string applies =
          !key.tasks.empty() || !key.traits.empty() ? fmt::format("{}", fmt::join(named, ", "))
          : read_by_every_task(*section)            ? std::string("all")
                                                    : fmt::format("{}", fmt::join(readers, ", "));
      out += fmt::format("| `{}` | {} | {} | {} |\n", key.path,
                         value.empty() ? "" : "`" + value + "`", applies, key.help);
    }
  }
  return out;
}

std::string config_show_text(const RunConfig& config,
                             const std::vector<OptionSpec>* device_options) {
  if (!config.schema) throw std::logic_error("config_show_text: a config read by load_run_config");
  const TaskSchema& schema = *config.schema;
  // (key, whether its section's one-value form gave it: `collective: mpi`)
  std::vector<std::pair<const ConfigKey*, bool>> keys;
  for (const auto* section : sections_of({schema})) {
    if (!read_by_every_task(*section) && !schema.reads(section->name)) continue;
    const bool one_value =
        !section->shorthand.empty() &&
        (config.overrides.contains(section->name) || config.lines.contains(section->name));
    for (const auto& key : section->keys)
      if (key_applies(key, schema))
        keys.emplace_back(&key, one_value && key.name() == section->shorthand);
  }
  std::string out = fmt::format(
      "# {} (task {}): every key that applies, its value, and where "
      "the value came from\n",
      config.file.string(), config.task);
  std::size_t width = 0;
  for (const auto& [key, shorthand] : keys) width = std::max(width, key->path.size());
  for (const auto& [key, shorthand] : keys) {
    const bool given = config.overrides.contains(key->path) || config.lines.contains(key->path);
    const std::string origin = given || shorthand ? config.locate(key->path) : "default";
    const std::string value = key->value(config);
    out += fmt::format("{:<{}}  {:<32}  # {}\n", key->path + ":", width + 1,
                       value.empty() ? "(unset)" : value, origin);
  }
  if (device_options) {
    // Every option of the backend, checked as run checks it.
    const DeviceOptions resolved = config.resolve_device(*device_options);
    for (const auto& spec : *device_options) {
      const std::string key = "device." + spec.name;
      const std::string& value = resolved.at(spec.name);
      const auto own = config.device_for.find(config.backend);
      const std::string origin = own != config.device_for.end() && own->second.contains(spec.name)
                                     ? config.locate("device." + config.backend + "." + spec.name)
                                 : config.device.contains(spec.name)
                                     ? config.locate(key)
                                     : fmt::format("default of backend {}", config.backend);
      out += fmt::format("{:<{}}  {:<32}  # {}\n", key + ":", width + 1,
                         value.empty() ? "(unset)" : value, origin);
    }
    return out;
  }
  for (const auto& [name, value] : config.device) {
    out += fmt::format("{:<{}}  {:<32}  # {}\n", "device." + name + ":", width + 1, value,
                       config.locate("device." + name));
  }
  for (const auto& [backend, given] : config.device_for) {
    for (const auto& [name, value] : given) {
      const std::string key = "device." + backend + "." + name;
      out +=
          fmt::format("{:<{}}  {:<32}  # {}{}\n", key + ":", width + 1, value, config.locate(key),
                      backend == config.backend ? "" : " (not this backend)");
    }
  }
  return out;
}

}  // namespace polyhal
