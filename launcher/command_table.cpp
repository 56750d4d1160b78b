// The command table: one row per command, each handler in its command's file.
#include "command_table.hpp"

#include <fmt/format.h>

#include <array>

#include "commands.hpp"
#include "polyhal/error.hpp"

namespace polyhal {

std::span<const CommandRow> command_table() {
  static constexpr std::array<CommandRow, 11> kCommands{{
      {"run", run_command},
      {"serve", serve_command},
      {"validate", validate_command},
      {"config", config_command},
      {"plugins", plugins_command},
      {"devices", devices_command},
      {"supervise", supervise_command},
      {"pack", pack_command},
      {"prepare-data", prepare_data_command},
      {"convert", convert_command},
      {"report", report_command},
  }};
  return kCommands;
}

void require_config(const CommandLine& cl) {
  if (cl.run.config.empty())
    throw UsageError(
        fmt::format("'{}' needs --config FILE (or the config as its first argument)\n{}",
                    cl.command, command_help(cl.command)));
}

}  // namespace polyhal
