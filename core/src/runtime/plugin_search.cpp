#include <fmt/format.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "polyhal/app/plugin_loader.hpp"

namespace polyhal {

#ifndef POLYHAL_PLUGIN_RELATIVE_DIR
#define POLYHAL_PLUGIN_RELATIVE_DIR "lib/polyhal/plugins"
#endif

std::vector<std::filesystem::path> local_plugin_dirs() {
  const std::filesystem::path local = "/usr/local";
  std::vector<std::filesystem::path> dirs{local / POLYHAL_PLUGIN_RELATIVE_DIR};
  if (dirs.front() != local / "lib/polyhal/plugins") dirs.push_back(local / "lib/polyhal/plugins");
  return dirs;
}

std::filesystem::path installed_plugin_dir(const std::filesystem::path& executable_dir) {
  return executable_dir / ".." / POLYHAL_PLUGIN_RELATIVE_DIR;
}

std::vector<PluginSearchDir> plugin_search_dirs(const PluginSearchOptions& options) {
  std::vector<PluginSearchDir> dirs;
  std::set<std::filesystem::path> seen;
  auto add = [&](const std::filesystem::path& path, const std::string& origin) {
    if (path.empty()) return;
    if (path.is_relative()) {
      // Its meaning would change with the current directory: anyone who can
      // make us start in a directory of theirs would choose our plugins.
      dirs.push_back({path, origin,
                      fmt::format("relative entry '{}' refused: it would depend on the current "
                                  "directory; give an absolute path",
                                  path.string())});
      return;
    }
    std::error_code ec;
    std::filesystem::path normal = std::filesystem::weakly_canonical(path, ec);
    if (ec) normal = path.lexically_normal();
    if (seen.insert(normal).second) dirs.push_back({normal, origin, {}});
  };
  for (const auto& dir : options.explicit_dirs) add(dir, "--plugin-path");
  if (options.use_environment) {
    if (const char* env = std::getenv("POLYHAL_PLUGIN_PATH"); env != nullptr) {
      std::stringstream list(env);
      for (std::string item; std::getline(list, item, ':');) add(item, "POLYHAL_PLUGIN_PATH");
    }
  }
  if (!options.executable_dir.empty()) {
    add(installed_plugin_dir(options.executable_dir), "install");
    // The build tree: only when the executable runs from a CMake binary dir,
    // so an installed polyhal never looks at a stale checkout, and a build
    // never at what an administrator installed under /usr/local.
    if (std::filesystem::exists(options.executable_dir / ".." / "CMakeCache.txt")) {
      add(options.executable_dir / ".." / "plugins", "build tree");
    } else {
      for (const auto& dir : local_plugin_dirs()) add(dir, "local");
    }
  }
  return dirs;
}

}  // namespace polyhal
