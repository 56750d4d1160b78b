// `polyhal plugins`: the search path and every plugin found, each loaded
// in a child process, and why any was refused.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iostream>

#include "command_table.hpp"
#include "run_setup.hpp"

namespace polyhal {

int list_plugins(const CommonOptions& common) {
  const auto options = search_options(common);
  std::cout << "search path (first wins):\n";
  int index = 1;
  for (const auto& dir : plugin_search_dirs(options)) {
    std::error_code ec;
    const std::string state = !dir.refused.empty() ? " [" + dir.refused + "]"
                              : std::filesystem::is_directory(dir.path, ec) ? ""
                                                                            : " [missing]";
    std::cout << fmt::format("  {}. {} ({}){}\n", index++, dir.path.string(), dir.origin, state);
  }
  // Each candidate loads in a child process: a crashing plugin is listed
  // with the signal, and nothing of any plugin runs in this process.
  const auto probed = probe_plugins(options);
  std::cout << "plugins:\n";
  if (probed.empty()) std::cout << "  none found\n";
  std::vector<std::string> names;
  for (const auto& [c, output, code, error] : probed) {
    if (c.status == PluginCandidate::Status::loaded) {
      names.push_back(c.name);
      std::cout << fmt::format("  {:<8} {:<8} ABI {:<5} loaded    {}\n           {}\n", c.name,
                               c.version, c.abi, c.path.string(), c.summary);
    } else {
      std::cout << fmt::format("  {:<8} {:<8} {:<9} {:<9} {}\n           reason: {}\n",
                               c.name.empty() ? "?" : c.name, c.version.empty() ? "-" : c.version,
                               c.abi.empty() ? "-" : "ABI " + c.abi, plugin_status_name(c.status),
                               c.path.string(), c.reason);
    }
  }
  std::sort(names.begin(), names.end());
  std::cout << fmt::format("backends: {}\n",
                           names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  return 0;
}

int plugins_command(CommandLine& cl, int, char**) {
  return list_plugins(cl.common);
}

}  // namespace polyhal
