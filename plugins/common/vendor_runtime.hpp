#pragma once
// Shared by the device-model plugins: what to say when hardware mode is asked for.
#include <string>

namespace polyhal::plugins {

/// Throws DeviceUnavailableError explaining that `device_kind` hardware mode
/// needs `runtime_library` (probed with dlopen, so the message says whether
/// it is installed) and that this plugin is a device model.
[[noreturn]] void refuse_hardware_mode(const std::string& device_kind,
                                       const std::string& runtime_library,
                                       const std::string& runtime_name);

}  // namespace polyhal::plugins
