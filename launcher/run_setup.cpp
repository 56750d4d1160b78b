#include "run_setup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "polyhal/error.hpp"

namespace polyhal {

PluginSearchOptions search_options(const CommonOptions& common,
                                   const std::vector<std::filesystem::path>& config_paths,
                                   std::optional<std::string> only_backend) {
  PluginSearchOptions options;
  options.explicit_dirs = common.plugin_paths;
  options.explicit_dirs.insert(options.explicit_dirs.end(), config_paths.begin(),
                               config_paths.end());
  options.executable_dir = common.executable_dir;
  options.allow_world_writable = common.allow_world_writable_plugins;
  options.only_backend = std::move(only_backend);
  return options;
}

void probe_selected_backend(const PluginSearchOptions& options) {
  for (const auto& probed : probe_plugins(options)) {
    const PluginCandidate& c = probed.candidate;
    if (c.status == PluginCandidate::Status::crashed) {
      throw PluginError(fmt::format("backend '{}' is not available: its plugin {}: {}", c.name,
                                    c.path.string(), c.reason));
    }
  }
}

std::vector<std::shared_ptr<Device>> open_devices_located(Backend& backend,
                                                          const DeviceOptions& options,
                                                          const RunConfig* config) {
  try {
    return backend.open_devices(options);
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    constexpr std::string_view prefix = "key '";
    if (config == nullptr || !message.starts_with(prefix)) throw;
    const auto end = message.find('\'', prefix.size());
    const std::string key = message.substr(prefix.size(), end - prefix.size());
    throw ConfigError(fmt::format("{}: {}", config->locate(key), message));
  }
}

[[noreturn]] void throw_probe_error(int code, const std::string& error) {
  throw Error(code >= 1 && code <= 4 ? static_cast<ExitCode>(code) : ExitCode::failure, error);
}

std::vector<Device*> raw(const std::vector<std::shared_ptr<Device>>& devices) {
  std::vector<Device*> out;
  for (const auto& d : devices) out.push_back(d.get());
  return out;
}

OpenedRun open_and_resolve(Backend& backend, const DeviceOptions& options, const RunConfig& config,
                           const WorldShape& world, bool plan_only) {
  OpenedRun run{open_devices_located(backend, options, &config), {}};
  if (run.devices.empty()) {
    throw DeviceUnavailableError(fmt::format("backend '{}' opened no devices", backend.name()));
  }
  run.plan = resolve_run(config, raw(run.devices), options, world, plan_only);
  const PrecisionPlan& precision = run.plan.precision;
  if (precision.warning)
    spdlog::warn("{}", precision.log_line);
  else if (!precision.log_line.empty())
    spdlog::info("{}", precision.log_line);
  if (!run.plan.placement.overlap_reason.empty())
    spdlog::info("{}", run.plan.placement.overlap_reason);
  if (const auto& engine = run.device().collective_engine();
      engine && run.plan.placement.plugin_collectives && run.plan.placement.replicas > 1)
    spdlog::info("collectives offered to the backend's engine '{}' first, each due within {:g} s",
                 engine->name(), config.collective.timeout_seconds);
  return run;
}

OpenedRun open_configured_run(const CommonOptions& common, const RunConfig& config,
                              const WorldShape& world, bool plan_only) {
  PluginLoader loader(search_options(common, config.plugin_paths, config.backend));
  auto backend = loader.backend(config.backend);
  return open_and_resolve(*backend, config.resolve_device(backend->device_options()), config, world,
                          plan_only);
}

void check_collective(const Task& task, const RunConfig& config) {
  if (config.collective.engine == "mpi" && !task.multi_process()) {
    std::vector<std::string> multi;
    for (const auto& t : registered_tasks())
      if (t->multi_process()) multi.push_back(t->schema().name);
    throw config.error("collective", fmt::format("mpi applies to the training tasks ({}), not {}",
                                                 fmt::join(multi, ", "), config.task));
  }
}

RunConfig loaded_config(const RunOptions& run) {
  RunConfig config =
      load_run_config(run.config, run.overrides, task_schemas(), run.override_origins);
  if (run.backend) config.backend = *run.backend;
  return config;
}

}  // namespace polyhal
