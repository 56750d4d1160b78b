#include "polyhal/backend.hpp"

#include <fmt/format.h>

#include <fmt/ranges.h>
#include <set>

#include "polyhal/app/device_options.hpp"
#include "polyhal/error.hpp"
#include "runtime/plugin_call.hpp"

namespace polyhal {

Backend::~Backend() = default;

std::vector<std::shared_ptr<Device>> Backend::open_devices(const DeviceOptions& options) {
  std::vector<std::shared_ptr<Device>> devices;
  auto opened = detail::call_into_plugin([&] { return do_open_devices(options); },
                                         "backend '" + name() + "': opening devices", "its", this);
  auto made = detail::call_into_plugin([&] { return do_make_collective_engine(options); },
                                       "backend '" + name() + "': making its collective engine",
                                       "its", this);
  std::shared_ptr<CollectiveEngine> engine;
  if (made) engine = anchor_to_library(std::move(made), library_anchor_);
  for (auto& device : opened) {
    device->library_anchor_ = library_anchor_;
    device->collective_engine_ = engine;
    devices.push_back(anchor_to_library(std::move(device), library_anchor_));
  }
  return devices;
}

std::unique_ptr<CollectiveEngine> Backend::do_make_collective_engine(const DeviceOptions&) {
  return nullptr;
}

DeviceOptions resolve_device_options(const std::vector<OptionSpec>& specs,
                                     const std::map<std::string, std::string>& given) {
  DeviceOptions resolved;
  std::set<std::string> known;
  for (const auto& spec : specs) {
    known.insert(spec.name);
    auto it = given.find(spec.name);
    const std::string value = it == given.end() ? spec.default_value : it->second;
    resolved[spec.name] = value;
    if (it == given.end()) continue;
    if (std::string problem = check_option_value(spec, value); !problem.empty()) {
      throw ConfigError(fmt::format("key 'device.{}': {}", spec.name, problem));
    }
  }
  for (const auto& [key, value] : given) {
    if (!known.contains(key)) {
      std::vector<std::string> names(known.begin(), known.end());
      throw ConfigError(
          fmt::format("key 'device.{}': this backend has no such device option; it has: {}", key,
                      fmt::join(names, ", ")));
    }
  }
  return resolved;
}

}  // namespace polyhal
