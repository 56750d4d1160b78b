#pragma once
// The common config sections, each declared in its own file of this folder
// (common_config_sections() puts them in reading order).
#include <string>
#include <vector>

#include "polyhal/app/config_schema.hpp"

namespace polyhal::config_sections {

ConfigSection top_level();  ///< backend, plugin_paths, device, task, ...
ConfigSection log();
ConfigSection model();
ConfigSection batch();
ConfigSection collective();
ConfigSection data();
ConfigSection optimizer();
ConfigSection checkpoint();

}  // namespace polyhal::config_sections
