#pragma once
/// @file config_keys.hpp
/// Every key a config file may hold, in one table: the reader accepts
/// exactly these (an unknown key is an error naming the nearest), `polyhal
/// config show` prints each with its value and where it came from, and
/// docs/config-reference.md is generated from it (`polyhal config
/// reference`; a test fails when the committed file differs). Device options
/// (`device.*`) belong to each backend: `polyhal devices --options`.
#include <functional>
#include <string>
#include <string_view>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"

namespace polyhal {

struct ConfigKey {
  std::string path;  ///< "batch.micro"
  std::string help;  ///< one line: what it does, its values
  /// The value in effect, as YAML text ("" when unset and without default).
  std::function<std::string(const RunConfig&)> value;
  /// The tasks it applies to; empty: every task.
  std::vector<std::string> tasks;
};

/// The table, in the order the reference lists it.
const std::vector<ConfigKey>& config_keys();
/// The key names directly under `section` ("" for the top level).
std::vector<std::string> config_section_keys(std::string_view section);
/// docs/config-reference.md.
std::string config_reference_markdown();
/// The resolved config: every key that applies to the config's task, with
/// its value and where the value came from (file:line, --set, or default).
/// With the backend's `device_options`, every device option too (given or
/// the backend's default), checked as `run` checks it: a ConfigError naming
/// file:line for an unknown option or a bad value. Without them, the
/// device.* values the config gives, unchecked.
std::string config_show_text(const RunConfig& config,
                             const std::vector<OptionSpec>* device_options = nullptr);

}  // namespace polyhal
