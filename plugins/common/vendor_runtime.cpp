#include "vendor_runtime.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal::plugins {

void refuse_hardware_mode(const std::string& device_kind, const std::string& runtime_library,
                          const std::string& runtime_name) {
  void* handle = ::dlopen(runtime_library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  const bool installed = handle != nullptr;
  if (handle != nullptr) ::dlclose(handle);
  throw DeviceUnavailableError(fmt::format(
      "{} hardware mode needs the {} ({}){}; this plugin is a device model and has no hardware "
      "path. Use device.mode: model (the default) for modelled numerics, memory and estimated "
      "speed",
      device_kind, runtime_name, runtime_library,
      installed ? ", which is installed, but polyhal cannot drive it yet"
                : ", which is not installed here"));
}

}  // namespace polyhal::plugins
