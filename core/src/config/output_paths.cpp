// Output places checked before a run starts (and by validate), so that a
// directory that cannot be made or written is found at once, not at the
// first save hours later.
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "polyhal/app/config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

namespace fs = std::filesystem;

/// `dir` must be a directory that exists or can be made: nothing is created
/// here, the nearest existing ancestor must be a writable directory.
void check_directory_target(const fs::path& dir, const std::string& key, const RunConfig& config) {
  std::error_code ec;
  fs::path existing = fs::absolute(dir, ec);
  while (!existing.empty() && !fs::exists(existing, ec) && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing, ec)) {
    throw config.error(key, fmt::format("{} cannot be a directory: {} is a file", dir.string(),
                                        existing.string()));
  }
  if (::access(existing.c_str(), W_OK) != 0) {
    throw config.error(key, fmt::format("{} cannot be written: {}: {}", dir.string(),
                                        existing.string(), std::strerror(errno)));
  }
}

/// `file` is written whole (or appended, for a log): it may not be a
/// directory, and its directory must exist or be makeable and writable.
void check_file_target(const fs::path& file, const std::string& key, const RunConfig& config) {
  std::error_code ec;
  if (fs::is_directory(file, ec)) {
    throw config.error(key, fmt::format("{} is a directory, not a file", file.string()));
  }
  check_directory_target(fs::absolute(file, ec).parent_path(), key, config);
}

}  // namespace

void check_output_paths(const RunConfig& config) {
  if (!config.schema) return;
  for (const ConfigKey* key : task_keys(*config.schema)) {
    if (key->output == OutputPath::none) continue;
    const fs::path place = key->value(config);
    if (place.empty()) continue;
    if (key->output == OutputPath::directory)
      check_directory_target(place, key->path, config);
    else
      check_file_target(place, key->path, config);
  }
}

}  // namespace polyhal
