// `polyhal devices`: each backend's devices and their properties, or its
// device options; each plugin opened in a child process of its own.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <array>
#include <iostream>
#include <map>

#include "command_table.hpp"
#include "run_setup.hpp"

namespace polyhal {
namespace {

/// A device's property table, its columns as wide as their widest cell.
std::string property_rows(const DeviceProperties& p) {
  std::size_t name_width = 4, value_width = 5;
  for (const auto& row : p.table) {
    name_width = std::max(name_width, row.name.size());
    value_width = std::max(value_width, row.value.size());
  }
  std::string text;
  for (const auto& row : p.table) {
    std::string line = fmt::format("  {:<{}}  {:<{}}  {:<9}  {}", row.name, name_width, row.value,
                                   value_width, provenance_name(row.source), row.note);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  }
  text += "  model.precision on this device:\n";
  for (const char* precision : {"f32", "bf16", "f16", "bf32", "int8"}) {
    const PrecisionMode mode = precision_mode(p, precision);
    text += fmt::format("    {:<5} {:<9} {}\n", precision, precision_support_name(mode.support),
                        mode.why);
  }
  return text;
}

/// The devices a backend opened: each with its properties, except that a
/// run of devices alike but for their number (the 8 cards of a server, the
/// IPUs of a pod) is shown once.
std::string devices_text(const std::vector<std::shared_ptr<Device>>& devices) {
  std::string text;
  for (std::size_t first = 0; first < devices.size();) {
    const auto& p = devices[first]->properties();
    const std::string rows = property_rows(p);
    std::size_t end = first + 1;
    while (end < devices.size() && property_rows(devices[end]->properties()) == rows &&
           devices[end]->properties().backend == p.backend)
      ++end;
    const std::string names = end - first == 1
                                  ? p.name
                                  : fmt::format("{} .. {} ({} alike)", p.name,
                                                devices[end - 1]->properties().name, end - first);
    text += fmt::format("{}  [{}]  {} {}  mode: {}\n", names, p.backend, p.vendor, p.product,
                        device_mode_name(p.mode)) +
            rows;
    first = end;
  }
  return text;
}

std::string device_options_text(const Backend& backend) {
  static constexpr std::array<const char*, 5> kTypes{"string", "integer", "number", "boolean",
                                                     "choice"};
  std::string text = fmt::format(
      "{} device options (set as device.NAME in a config, or --set "
      "device.NAME=value):\n",
      backend.name());
  for (const auto& o : backend.device_options()) {
    const std::string type = o.type == OptionSpec::Type::choice
                                 ? fmt::format("one of {}", fmt::join(o.choices, "|"))
                                 : kTypes[static_cast<std::size_t>(o.type)];
    text += fmt::format("  {:<26} {:<30} default {}\n      {}\n", o.name, type,
                        o.default_value.empty() ? "(none)" : o.default_value, o.help);
  }
  return text;
}

}  // namespace

int list_devices(const CommonOptions& common, const std::optional<std::string>& backend_name,
                 const std::vector<std::string>& overrides, bool options_only) {
  std::map<std::string, std::string> given;
  for (const auto& text : overrides) {
    const auto eq = text.find('=');
    if (!text.starts_with("device.") || eq == std::string::npos) {
      throw UsageError(
          fmt::format("--set {}: 'devices' takes only device options, as device.NAME=value", text));
    }
    given[text.substr(7, eq - 7)] = text.substr(eq + 1);
  }
  if (!given.empty() && !backend_name) throw UsageError("--set device.* needs --backend NAME");
  // Every plugin opens its devices in a child process of its own (as
  // `plugins`), so one that crashes cannot hide the others.
  const auto probed =
      probe_plugins(search_options(common, {}, backend_name), [&](Backend& backend) {
        if (options_only) return device_options_text(backend);
        const auto options = resolve_device_options(backend.device_options(), given);
        return devices_text(open_devices_located(backend, options, nullptr));
      });
  std::vector<PluginCandidate> candidates;
  int shown = 0;
  for (const auto& [c, output, code, error] : probed) {
    candidates.push_back(c);
    if (c.status == PluginCandidate::Status::loaded && !code) {
      std::cout << output;
      ++shown;
    } else if (code) {
      // The requested backend refused its options or devices: its error is the answer.
      throw_probe_error(*code, error);
    } else if (!backend_name && (c.status == PluginCandidate::Status::rejected ||
                                 c.status == PluginCandidate::Status::crashed)) {
      spdlog::warn("plugin {} {}: {}", c.path.string(), plugin_status_name(c.status), c.reason);
    }
  }
  if (shown == 0 && backend_name)
    throw PluginError(detail::backend_unavailable_message(*backend_name, candidates));
  if (shown == 0) throw PluginError("no backends are loaded; run 'polyhal plugins' to see why");
  return 0;
}

int devices_command(CommandLine& cl, int, char**) {
  return list_devices(cl.common, cl.run.backend, cl.run.overrides, cl.device_options);
}

}  // namespace polyhal
