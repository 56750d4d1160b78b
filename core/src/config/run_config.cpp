// Reading a run config: the YAML file, its --set overrides, and every
// section the task reads, through the keys each section declares
// (config_schema.hpp); nothing here knows a key or a task by name beyond the
// top-level ones every task has.
#include <fmt/format.h>

#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>
#include <utility>

#include <algorithm>
#include <fstream>
#include <functional>

#include "polyhal/app/config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/suggest.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

/// A config file: bytes read, mapping depth and keys walked.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;
constexpr int kMaxConfigDepth = 16;
constexpr std::int64_t kMaxConfigKeys = 10000;

/// Remembers where each key of a config file is, so every error can name
/// file, line and key.
class LineMap {
 public:
  explicit LineMap(RunConfig& config) : config_(config) {}

  /// Records each key's line, and refuses a key given twice in one mapping
  /// (yaml-cpp would silently keep one of them). Aliases share their
  /// anchor's nodes, so nested aliases would make this walk exponential: the
  /// walk is bounded in depth and in keys visited.
  void remember_lines(const YAML::Node& node, const std::string& prefix, int depth = 0) {
    if (!node.IsMap()) return;
    if (depth > kMaxConfigDepth)
      throw ConfigError(fmt::format("{}: key '{}': nested deeper than {} levels",
                                    config_.file.string(), prefix, kMaxConfigDepth));
    std::map<std::string, int> seen;
    for (const auto& entry : node) {
      if (++visited_ > kMaxConfigKeys)
        throw ConfigError(
            fmt::format("{}: more than {} keys (aliases expanding?): a config is a few dozen keys",
                        config_.file.string(), kMaxConfigKeys));
      const std::string key =
          prefix.empty() ? entry.first.Scalar() : prefix + "." + entry.first.Scalar();
      const int line = entry.first.Mark().line + 1;
      if (auto [it, fresh] = seen.emplace(key, line); !fresh) {
        throw ConfigError(fmt::format("{}:{}: key '{}': given twice (first at line {})",
                                      config_.file.string(), line, key, it->second));
      }
      if (entry.first.Mark().line >= 0) config_.lines[key] = line;
      remember_lines(entry.second, key, depth + 1);
    }
  }

 private:
  RunConfig& config_;
  std::int64_t visited_ = 0;  // keys remember_lines walked
};

/// Merges `patch` into `target`, recursing into mappings present in both.
void merge_into(YAML::Node target, const YAML::Node& patch) {
  for (const auto& entry : patch) {
    const std::string key = entry.first.Scalar();
    if (entry.second.IsMap() && target[key] && target[key].IsMap()) {
      merge_into(target[key], entry.second);
    } else {
      target[key] = entry.second;
    }
  }
}

void apply_override(YAML::Node& root, const std::string& text, RunConfig& config,
                    const std::string& origin) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw ConfigError(fmt::format("--set {}: expected key.path=value", text));
  }
  const std::string path = text.substr(0, eq);
  const std::string value_text = text.substr(eq + 1);
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception&) {
    value = YAML::Node(value_text);
  }
  if (value.IsNull() && !value_text.empty() && value_text != "null" && value_text != "~") {
    value = YAML::Node(value_text);
  }
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  if (value_text == "null" || value_text == "~") {
    // Unset: the key as if the file never gave it (its default, or what
    // another key then decides: learning_rate_per_worker over learning_rate).
    YAML::Node parent;
    parent.reset(root);  // reset rebinds; yaml-cpp's = would copy into root
    bool found = parent.IsMap();
    for (std::size_t i = 0; found && i + 1 < parts.size(); ++i) {
      const YAML::Node child = std::as_const(parent)[parts[i]];  // const: never inserts
      // A section the config lacks is an undefined node: any question to it
      // but "are you defined?" throws, so stop before asking.
      found = child.IsDefined() && child.IsMap();
      if (found) parent.reset(child);
    }
    if (!found || !std::as_const(parent)[parts.back()])
      throw ConfigError(
          fmt::format("--set {}: the config does not give {}, so there is nothing "
                      "to unset",
                      text, path));
    parent.remove(parts.back());
    std::erase_if(config.lines, [&](const auto& entry) {
      return entry.first == path || entry.first.starts_with(path + ".");
    });
    return;
  }
  // Build {a: {b: value}} and merge it in.
  YAML::Node patch = value;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->empty()) throw ConfigError(fmt::format("--set {}: empty key in '{}'", text, path));
    YAML::Node level(YAML::NodeType::Map);
    level[*it] = patch;
    patch = level;
  }
  merge_into(root, patch);
  config.overrides[path] = origin.empty() ? "--set " + text : origin;
}

[[noreturn]] void unknown_key(const RunConfig& config, const std::string& prefix,
                              const std::string& name, const std::vector<std::string>& allowed) {
  const auto suggestion = nearest_word(name, allowed);
  config.fail(prefix.empty() ? name : prefix + "." + name,
              !suggestion ? "unknown key"
                          : fmt::format("unknown key (did you mean '{}'?)",
                                        prefix.empty() ? *suggestion : prefix + "." + *suggestion));
}

/// "task squad" or "tasks pretrain, squad, glue": those of `tasks` `key` applies to.
std::string tasks_text(const ConfigKey& key, const std::vector<TaskSchema>& tasks) {
  std::vector<std::string> names;
  for (const auto& task : tasks)
    if (key_applies(key, task)) names.push_back(task.name);
  return fmt::format("{} {}", names.size() == 1 ? "task" : "tasks", fmt::join(names, ", "));
}

/// Reads one section as given, through the keys it declares (`tasks`: every
/// task there is, for naming those a key is for).
void read_section(const ConfigSection& section, const ConfigValue& given, const TaskSchema& schema,
                  const std::vector<TaskSchema>& tasks, RunConfig& config) {
  const auto key_named = [&](const std::string& name) -> const ConfigKey* {
    for (const auto& key : section.keys)
      if (key.name() == name) return &key;
    return nullptr;
  };
  // A one-value section (`steps: 100`) is its one key.
  const bool one_value = section.keys.size() == 1 && section.keys[0].path == section.name;
  if (one_value || !given.is_map()) {
    const ConfigKey* key = section.shorthand.empty() ? nullptr : key_named(section.shorthand);
    if (!key || given.is_list()) given.fail("expected a mapping of keys to values");
    key->read(given, config);
  } else {
    std::vector<std::string> allowed;
    for (const auto& key : section.keys)
      if (key_applies(key, schema)) allowed.push_back(key.name());
    for (const auto& name : given.names()) {
      const ConfigKey* key = key_named(name);
      if (!key) unknown_key(config, section.name, name, allowed);
      if (!key_applies(*key, schema))
        config.fail(key->path,
                    fmt::format("used by {} only, not {}", tasks_text(*key, tasks), schema.name));
    }
    for (const auto& key : section.keys)
      if (given.has(key.name())) key.read(given[key.name()], config);
  }
  if (section.check) section.check(given, config);
}

/// A second YAML document ("---" or "..." at the start of a line after the
/// first document's content) would be silently ignored by LoadFile: refused
/// at its line. Found by scanning the text: yaml-cpp's LoadAll can loop
/// without end on malformed input (found by fuzz_config).
void refuse_second_document(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  bool content = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const bool marker = (line.starts_with("---") || line.starts_with("...")) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker && content)
      throw ConfigError(fmt::format(
          "{}:{}: a second YAML document: a config is one document (remove the '{}' and what "
          "follows, or merge it into the first)",
          file.string(), number, line.substr(0, 3)));
    const auto first = line.find_first_not_of(" \t\r");
    if (!marker && first != std::string::npos && line[first] != '#' && line[first] != '%')
      content = true;
  }
}

YAML::Node load_yaml(const std::filesystem::path& file) {
  detail::refuse_special_file(file);
  std::error_code size_error;
  if (const auto bytes = std::filesystem::file_size(file, size_error);
      !size_error && bytes > kMaxConfigBytes) {
    throw ConfigError(fmt::format("{}: {} bytes: a config is a few KiB (at most {} read)",
                                  file.string(), bytes, kMaxConfigBytes));
  }
  refuse_second_document(file);
  YAML::Node root;
  try {
    root = YAML::LoadFile(file.string());
  } catch (const YAML::BadFile&) {
    // yaml-cpp does not say why; the file system does.
    std::error_code error;
    const auto status = std::filesystem::status(file, error);
    std::string why = "it cannot be opened for reading (check its permissions)";
    if (!std::filesystem::exists(status)) {
      const auto parent = file.has_parent_path() ? file.parent_path() : ".";
      why = std::filesystem::is_directory(parent, error)
                ? fmt::format("no such file in {}", parent.string())
                : fmt::format("no such file: the directory {} does not exist", parent.string());
    } else if (std::filesystem::is_directory(status)) {
      why = "it is a directory; name a .yaml file in it (the shipped ones are in configs/)";
    }
    throw ConfigError(fmt::format("{}: cannot read the config file: {}", file.string(), why));
  } catch (const YAML::ParserException& e) {
    throw ConfigError(fmt::format("{}:{}:{}: YAML syntax error: {}", file.string(), e.mark.line + 1,
                                  e.mark.column + 1, e.msg));
  }
  if (root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap())
    throw ConfigError(
        fmt::format("{}: expected a mapping of keys at the top level", file.string()));
  return root;
}

/// The schema `config.task` names.
const TaskSchema& schema_named(const RunConfig& config, const std::vector<TaskSchema>& tasks,
                               bool given) {
  std::vector<std::string> names;
  for (const auto& schema : tasks) names.push_back(schema.name);
  std::sort(names.begin(), names.end());
  if (!given) config.fail("task", fmt::format("required: one of {}", fmt::join(names, ", ")));
  for (const auto& schema : tasks)
    if (schema.name == config.task) return schema;
  config.fail("task", fmt::format("unknown task \"{}\"; this version runs: {}", config.task,
                                  fmt::join(names, ", ")));
}

}  // namespace

std::string ConfigKey::name() const {
  return path.substr(path.rfind('.') + 1);
}

bool TaskSchema::has(TaskTrait trait) const {
  return std::find(traits.begin(), traits.end(), trait) != traits.end();
}

const char* task_trait_text(TaskTrait trait) {
  switch (trait) {
    case TaskTrait::trains:
      return "the tasks that train";
    case TaskTrait::reads_pretraining_data:
      return "the tasks that read pre-training data";
    case TaskTrait::runs_inference:
      return "the tasks that time forward passes";
    case TaskTrait::takes_int8:
      return "the tasks that run inference or evaluation";
  }
  return "?";
}

bool TaskSchema::reads(const std::string& section) const {
  if (std::find(sections.begin(), sections.end(), section) != sections.end()) return true;
  return std::any_of(own.begin(), own.end(), [&](const auto& s) { return s->name == section; });
}

ConfigError RunConfig::error(const std::string& key_path, const std::string& problem) const {
  return ConfigError(fmt::format("{}: key '{}': {}", locate(key_path), key_path, problem));
}

void RunConfig::fail(const std::string& key_path, const std::string& problem) const {
  throw error(key_path, problem);
}

std::string RunConfig::locate(const std::string& key_path) const {
  for (std::string prefix = key_path;;) {
    if (auto it = overrides.find(prefix); it != overrides.end()) return it->second;
    const auto dot = prefix.rfind('.');
    if (dot == std::string::npos) break;
    prefix = prefix.substr(0, dot);
  }
  // A section only a --set made (--set checkpoint.dir=x on a config without
  // 'checkpoint') came from that --set, not from the file.
  if (!lines.contains(key_path)) {
    for (const auto& [key, origin] : overrides) {
      if (key.starts_with(key_path + ".")) return origin;
    }
  }
  for (std::string prefix = key_path;;) {
    if (auto it = lines.find(prefix); it != lines.end())
      return fmt::format("{}:{}", file.string(), it->second);
    const auto cut = prefix.find_last_of(".[");
    if (cut == std::string::npos) break;
    prefix = prefix.substr(0, cut);
  }
  return file.string();
}

DeviceOptions RunConfig::resolve_device(const std::vector<OptionSpec>& specs) const {
  DeviceOptions resolved;
  for (const auto& spec : specs) resolved[spec.name] = spec.default_value;
  std::vector<std::pair<std::string, std::string>> given;  // (key, value)
  for (const auto& [name, value] : device) given.emplace_back("device." + name, value);
  if (const auto own = device_for.find(backend); own != device_for.end())
    for (const auto& [name, value] : own->second)
      given.emplace_back("device." + backend + "." + name, value);
  // The backend's own options win over the flat ones, but the command line
  // (--set device.X=...) wins over the file.
  for (const auto& [name, value] : device)
    if (overrides.contains("device." + name)) given.emplace_back("device." + name, value);
  for (const auto& [key, value] : given) {
    const std::string name = key.substr(key.rfind('.') + 1);
    const std::string& option = name;  // (clang 14 cannot capture a structured binding)
    auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const auto& s) { return s.name == option; });
    if (spec == specs.end()) {
      std::vector<std::string> names;
      for (const auto& s : specs) names.push_back(s.name);
      throw ConfigError(
          fmt::format("{}: key '{}': backend '{}' has no such device option; it has: {}",
                      locate(key), key, backend, fmt::join(names, ", ")));
    }
    if (std::string problem = check_option_value(*spec, value); !problem.empty()) {
      throw error(key, problem);
    }
    resolved[name] = value;
  }
  return resolved;
}

RunConfig load_run_config(const std::filesystem::path& file,
                          const std::vector<std::string>& overrides,
                          const std::vector<TaskSchema>& tasks,
                          const std::vector<std::string>& origins) {
  RunConfig config;
  config.file = file;
  // No file (polyhal serve MODEL_DIR): the overrides are the whole config.
  YAML::Node root = file.empty() ? YAML::Node(YAML::NodeType::Map) : load_yaml(file);
  LineMap(config).remember_lines(root, "");
  for (std::size_t i = 0; i < overrides.size(); ++i)
    apply_override(root, overrides[i], config, i < origins.size() ? origins[i] : std::string());
  const ConfigValue given(root, "", config);

  // Every section any task reads, in reading order: the common ones, then
  // the tasks' own (a section shared by tasks once).
  const auto& common = common_config_sections();
  std::vector<const ConfigSection*> sections;
  for (const auto& section : common) sections.push_back(&section);
  for (const auto& schema : tasks)
    for (const auto& section : schema.own)
      if (std::none_of(sections.begin(), sections.end(),
                       [&](const ConfigSection* s) { return s->name == section->name; }))
        sections.push_back(section.get());
  const ConfigSection& top = *sections.front();
  std::vector<std::string> top_names;
  for (const auto& key : top.keys) top_names.push_back(key.name());
  for (const auto* section : sections)
    if (!section->name.empty()) top_names.push_back(section->name);
  for (const auto& name : given.names())
    if (std::find(top_names.begin(), top_names.end(), name) == top_names.end())
      unknown_key(config, "", name, top_names);

  if (!given.has("backend"))
    config.fail("backend", "required: the backend to run on (cpu, ipu, gaudi)");
  for (const auto& key : top.keys)
    if (given.has(key.name())) key.read(given[key.name()], config);
  const TaskSchema& schema = schema_named(config, tasks, given.has("task"));
  config.schema = std::make_shared<const TaskSchema>(schema);
  for (const auto& section : schema.own)
    if (section->add_defaults) section->add_defaults(config);
  for (const auto& section : schema.required)
    if (!given.has(section)) config.fail(section, fmt::format("required by task {}", config.task));
  for (const auto* section : sections) {
    if (section->name.empty() || !given.has(section->name)) continue;
    const bool common_section = section->name == "log";
    if (!common_section && !schema.reads(section->name))
      config.fail(section->name, fmt::format("not used by task {}", config.task));
    read_section(*section, given[section->name], schema, tasks, config);
  }
  if (schema.check) schema.check(config);
  return config;
}

DataSource data_source(const RunConfig& config) {
  // A copy: the readers may outlive the config they were opened from.
  return {config.data, [config](const std::string& key) { return config.locate(key); }};
}

}  // namespace polyhal
