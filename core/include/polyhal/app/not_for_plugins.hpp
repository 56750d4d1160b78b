#pragma once
/// @file not_for_plugins.hpp
/// Included by every header under polyhal/app/: the framework's own API
/// (config, tasks, data, models, training), which is not the plugin
/// contract and changes without an ABI change. A plugin built by
/// polyhal_add_plugin (which defines POLYHAL_BUILDING_PLUGIN) that includes
/// one fails to build now instead of breaking against a later polyhal.
#ifdef POLYHAL_BUILDING_PLUGIN
#error \
    "polyhal/app/ headers are not the plugin contract: a plugin includes only polyhal/*.hpp (polyhal/abi.hpp lists them)"
#endif
