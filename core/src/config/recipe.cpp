#include "polyhal/app/recipe.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <system_error>

#include "polyhal/app/config_keys.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

std::string line_of(const std::filesystem::path& file, const YAML::Node& node) {
  return fmt::format("{}:{}", file.string(), node.Mark().line + 1);
}

[[noreturn]] void fail(const std::filesystem::path& file, const YAML::Node& node,
                       const std::string& key, const std::string& problem) {
  throw ConfigError(fmt::format("{}: key '{}': {}", line_of(file, node), key, problem));
}

/// A mapping's key as text; a key that is not a scalar is an error at its line.
std::string key_text(const std::filesystem::path& file, const YAML::Node& key,
                     const std::string& where) {
  if (!key.IsScalar()) fail(file, key, where, "expected a plain key");
  return key.Scalar();
}

/// A value as --set takes it: scalars as written, lists and maps in flow style.
std::string value_text(const YAML::Node& value) {
  if (value.IsScalar()) return value.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << value;
  return out.c_str();
}

/// `set:` entries in order, as overrides with their lines.
void add_overrides(const std::filesystem::path& file, const YAML::Node& set, const std::string& key,
                   std::vector<std::string>& overrides, std::vector<std::string>& origins) {
  if (!set.IsMap()) fail(file, set, key, "expected a mapping of key paths to values");
  for (const auto& entry : set) {
    const std::string path = key_text(file, entry.first, key);
    overrides.push_back(path + "=" + value_text(entry.second));
    origins.push_back(fmt::format("{} ({} {})", line_of(file, entry.first), key, path));
  }
}

void check_keys(const std::filesystem::path& file, const YAML::Node& map, const std::string& prefix,
                const std::vector<std::string>& allowed) {
  for (const auto& entry : map) {
    const std::string name = key_text(file, entry.first, prefix.empty() ? "(top level)" : prefix);
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
      fail(file, entry.first, prefix + name,
           fmt::format("unknown key in a recipe; it has {}", fmt::join(allowed, ", ")));
  }
}

YAML::Node load(const std::filesystem::path& file) {
  try {
    return YAML::LoadFile(file.string());
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

Recipe read_recipe_nodes(const std::filesystem::path& file, const YAML::Node& root);

}  // namespace

bool is_recipe(const std::filesystem::path& file) {
  // A FIFO, a device or a directory is the config reader's to refuse.
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) return false;
  try {
    const YAML::Node root = YAML::LoadFile(file.string());
    return root.IsMap() && root["stages"];
  } catch (const std::exception&) {
    return false;  // the config reader says what is wrong with it
  }
}

Recipe read_recipe(const std::filesystem::path& file) {
  try {
    return read_recipe_nodes(file, load(file));
  } catch (const YAML::Exception& e) {
    throw ConfigError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

namespace {

Recipe read_recipe_nodes(const std::filesystem::path& file, const YAML::Node& root) {
  if (!root.IsMap())
    throw ConfigError(fmt::format("{}: a recipe is a mapping with dir and stages", file.string()));
  Recipe recipe;
  recipe.file = file;
  check_keys(file, root, "", {"description", "dir", "backend", "set", "stages"});
  if (!root["dir"] || !root["dir"].IsScalar())
    throw ConfigError(fmt::format(
        "{}: key 'dir': required: the directory where the recipe records finished stages",
        file.string()));
  recipe.dir = root["dir"].Scalar();
  if (root["backend"]) recipe.backend = root["backend"].Scalar();
  std::vector<std::string> shared, shared_origins;
  if (root["set"]) add_overrides(file, root["set"], "set", shared, shared_origins);
  const YAML::Node stages = root["stages"];
  if (!stages.IsSequence() || stages.size() == 0)
    fail(file, stages, "stages", "expected a list of stages (name, config, set)");
  std::set<std::string> names;
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const YAML::Node stage = stages[i];
    const std::string key = fmt::format("stages[{}]", i);
    if (!stage.IsMap()) fail(file, stage, key, "expected a mapping with name, config and set");
    check_keys(file, stage, key + ".", {"name", "config", "set"});
    RecipeStage s;
    s.where = line_of(file, stage);
    if (!stage["name"] || !stage["name"].IsScalar()) fail(file, stage, key + ".name", "required");
    s.name = stage["name"].Scalar();
    const bool plain = !s.name.empty() && std::all_of(s.name.begin(), s.name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
    });
    if (!plain)
      fail(file, stage["name"], key + ".name",
           fmt::format("\"{}\": letters, digits, - and _ only (it names a file)", s.name));
    if (!names.insert(s.name).second)
      fail(file, stage["name"], key + ".name", fmt::format("a second stage named {}", s.name));
    if (!stage["config"] || !stage["config"].IsScalar())
      fail(file, stage, key + ".config", "required: the stage's config file");
    s.config = std::filesystem::path(stage["config"].Scalar());
    if (s.config.is_relative()) s.config = file.parent_path() / s.config;
    if (!std::filesystem::is_regular_file(s.config))
      fail(file, stage["config"], key + ".config",
           fmt::format("no such config file: {}", s.config.string()));
    s.overrides = shared;
    s.origins = shared_origins;
    if (stage["set"]) add_overrides(file, stage["set"], key + ".set", s.overrides, s.origins);
    recipe.stages.push_back(std::move(s));
  }
  return recipe;
}

}  // namespace

void check_stage_inputs(const Recipe& recipe, const std::vector<RunConfig>& configs) {
  std::vector<std::pair<std::string, std::filesystem::path>> produced;  // (stage, directory)
  const auto normal = [](const std::filesystem::path& p) {
    return std::filesystem::weakly_canonical(std::filesystem::absolute(p));
  };
  for (std::size_t i = 0; i < configs.size(); ++i) {
    const RunConfig& config = configs[i];
    const auto& init = config.checkpoint.init;
    if (!init.empty() && !std::filesystem::exists(init)) {
      const auto wanted = normal(init);
      const bool made = std::any_of(produced.begin(), produced.end(), [&](const auto& p) {
        const auto rel = wanted.lexically_relative(p.second);
        return !rel.empty() && *rel.begin() != "..";
      });
      if (!made) {
        std::vector<std::string> earlier;
        for (const auto& [stage, dir] : produced)
          earlier.push_back(fmt::format("{} writes {}", stage, dir.string()));
        throw config.error(
            "checkpoint.init",
            fmt::format("stage '{}' starts from {}, which does not exist and no "
                        "earlier stage writes it ({})",
                        recipe.stages[i].name, init.string(),
                        earlier.empty() ? "it is the first stage"
                                        : fmt::format("{}", fmt::join(earlier, "; "))));
      }
    }
    // A model file an earlier stage writes is read through checkpoint.init,
    // whose directory's config.json gives the dimensions when the stage
    // starts: the model.* paths are read as the recipe is checked.
    for (const auto& [key, path] : {std::pair{"model.hf_config", config.model.hf_config},
                                    std::pair{"model.weights", config.model.weights}}) {
      if (path.empty() || std::filesystem::exists(path)) continue;
      const auto wanted = normal(path);
      for (const auto& [stage, dir] : produced) {
        const auto rel = wanted.lexically_relative(dir);
        if (rel.empty() || *rel.begin() == "..") continue;
        throw config.error(
            key,
            fmt::format("stage '{}' names {}, which stage '{}' writes: start from it with "
                        "checkpoint.init: {} (the model directory; its config.json gives "
                        "the dimensions when the stage starts)",
                        recipe.stages[i].name, path.string(), stage, path.parent_path().string()));
      }
    }
    if (!config.schema) continue;
    for (const ConfigKey* key : task_keys(*config.schema)) {
      if (key->output != OutputPath::directory) continue;
      const std::filesystem::path dir = key->value(config);
      if (!dir.empty()) produced.emplace_back(recipe.stages[i].name, normal(dir));
    }
  }
}

}  // namespace polyhal
