// Inputs checked before a run starts (and by validate): `validate` saying
// ok must mean `run` starts, not that it fails at once on a missing file.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "polyhal/app/config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

namespace fs = std::filesystem;

/// What is wrong with `place` as input of kind `kind`; empty when nothing.
std::string input_problem(const fs::path& place, InputPath kind) {
  std::error_code ec;
  fs::path target = place;
  if (kind == InputPath::checkpoint && !fs::exists(place, ec)) {
    // A TensorFlow checkpoint is named by its prefix (model.ckpt-28252).
    fs::path index = place;
    index += ".index";
    if (fs::exists(index, ec)) target = index;
  }
  // Relative paths were made absolute against the current directory when read.
  if (!fs::exists(target, ec)) {
    if (ec == std::errc::too_many_symbolic_link_levels)
      return fmt::format("{}: a loop of symbolic links (each names the next)", place.string());
    return fmt::format("{}: no such {}", place.string(),
                       kind == InputPath::file ? "file" : "file or directory");
  }
  if (kind == InputPath::file && fs::is_directory(target, ec))
    return fmt::format("{}: a directory, where a file is read", place.string());
  if (::access(target.c_str(), R_OK) != 0)
    return fmt::format("{}: cannot be read: {}", place.string(), std::strerror(errno));
  return {};
}

}  // namespace

void check_input_paths(const RunConfig& config, const std::vector<std::string>& skip) {
  if (!config.schema) return;
  std::vector<std::string> problems;
  for (const ConfigKey* key : task_keys(*config.schema)) {
    if (key->input == InputPath::none) continue;
    if (std::find(skip.begin(), skip.end(), key->path) != skip.end()) continue;
    const fs::path place = key->value(config);
    if (place.empty()) continue;
    if (const auto problem = input_problem(place, key->input); !problem.empty())
      problems.emplace_back(config.error(key->path, problem).what());
  }
  if (problems.size() == 1) throw ConfigError(problems.front());
  if (!problems.empty())
    throw ConfigError(fmt::format("{} inputs the config names are missing:\n  {}", problems.size(),
                                  fmt::join(problems, "\n  ")));
}

}  // namespace polyhal
