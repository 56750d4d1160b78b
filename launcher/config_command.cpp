// `polyhal config show` and `config reference`: the resolved config with
// every device option of its backend, or every key of every task.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "command_table.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/recipe.hpp"
#include "recipe_command.hpp"
#include "run_setup.hpp"

namespace polyhal {
namespace {

/// The plugin's own checks of the config's device options (a range, a
/// combination), made where it makes them: on opening the devices. Only a
/// config error counts; devices that are absent (hardware mode without the
/// vendor runtime) say nothing about the config.
void check_device_options(Backend& backend, const std::vector<OptionSpec>& specs,
                          const RunConfig& config) {
  try {
    open_devices_located(backend, config.resolve_device(specs), &config);
  } catch (const DeviceUnavailableError&) {
  }
}

}  // namespace

int show_config(const CommonOptions& common, const RunOptions& run) {
  const RunConfig config = loaded_config(run);
  const auto probed = probe_plugins(search_options(common, config.plugin_paths, config.backend),
                                    [&](Backend& backend) {
                                      const auto specs = backend.device_options();
                                      std::string text = config_show_text(config, &specs);
                                      check_device_options(backend, specs, config);
                                      return text;
                                    });
  std::vector<PluginCandidate> candidates;
  for (const auto& [c, output, code, error] : probed) {
    candidates.push_back(c);
    if (c.name != config.backend || c.status != PluginCandidate::Status::loaded) continue;
    if (code) throw_probe_error(*code, error);
    std::cout << output;
    return 0;
  }
  spdlog::warn("only the device options the config gives are shown: {}",
               detail::backend_unavailable_message(config.backend, candidates));
  std::cout << config_show_text(config);
  return 0;
}

int config_command(CommandLine& cl, int, char**) {
  if (cl.config_action == "reference") {
    std::cout << config_reference_markdown(task_schemas());
    return 0;
  }
  require_config(cl);
  if (is_recipe(cl.run.config)) return show_recipe_config(cl.common, cl.run);
  // The reader validate and run use: the same file:line errors.
  return show_config(cl.common, cl.run);
}

}  // namespace polyhal
