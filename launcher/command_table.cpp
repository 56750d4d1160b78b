// The command table, and the commands too small for a file of their own.
#include "command_table.hpp"

#include <array>

#include "commands.hpp"

namespace polyhal {

std::span<const CommandRow> command_table() {
  static constexpr std::array<CommandRow, 10> kCommands{{
      {"run", run_command},
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

int plugins_command(CommandLine& cl, int, char**) {
  return list_plugins(cl.common);
}

int devices_command(CommandLine& cl, int, char**) {
  return list_devices(cl.common, cl.run.backend, cl.run.overrides, cl.device_options);
}

}  // namespace polyhal
