#pragma once
/// @file device_options.hpp
/// Checking a device option's value (`device.<name>` in a config) against
/// the backend's OptionSpec, before the plugin sees it.
#include <string>

#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/backend.hpp"

namespace polyhal {

/// Checks one option value; returns the problem ("expected an integer, got
/// \"x\"") or an empty string.
std::string check_option_value(const OptionSpec& spec, const std::string& value);

}  // namespace polyhal
