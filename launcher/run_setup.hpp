#pragma once
// What run, validate and config show share: where plugins are searched, the
// backend probed in a child first, devices opened with located errors, the
// run resolved on them (run_plan.hpp), and the config as loaded.
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/app/tensor_limit.hpp"

namespace polyhal {

class LogFileSink;
/// Sets the log level and adds log.file's sink, returned so that the run
/// can check at its end that every line reached the file.
std::shared_ptr<LogFileSink> configure_logging(const CommonOptions& common,
                                               const RunConfig& config);

/// Where to look for plugins. Permission to load from writable places comes
/// from the command line only, never from a config file.
PluginSearchOptions search_options(const CommonOptions& common,
                                   const std::vector<std::filesystem::path>& config_paths = {},
                                   std::optional<std::string> only_backend = {});

/// Loads the selected backend's plugin once in a child process before this
/// process loads it: a plugin that crashes or hangs while loading is then
/// an error (exit 3) naming the signal, not a crash of the launcher. Runs
/// before MPI is initialised and before any thread is started.
void probe_selected_backend(const PluginSearchOptions& options);

/// Opens `backend`'s devices. A plugin's own check of a device option
/// ("key 'device.cards': ...") gets the place the value came from.
std::vector<std::shared_ptr<Device>> open_devices_located(Backend& backend,
                                                          const DeviceOptions& options,
                                                          const RunConfig* config);

/// A probe callback's error (what the plugin threw in the child), thrown
/// here with the exit code it carried.
[[noreturn]] void throw_probe_error(int code, const std::string& error);

/// The raw pointers of `devices`, in order.
std::vector<Device*> raw(const std::vector<std::shared_ptr<Device>>& devices);

/// The devices a run opened and its plan on them.
struct OpenedRun {
  std::vector<std::shared_ptr<Device>> devices;  ///< each keeps its plugin library loaded
  RunPlan plan;
  Device& device() const { return *devices.front(); }
};

/// Opens `backend`'s devices with `options` and resolves the run on them
/// (run_plan.hpp), logging what the plan decided once.
OpenedRun open_and_resolve(Backend& backend, const DeviceOptions& options, const RunConfig& config,
                           const WorldShape& world, bool plan_only);

/// The devices of the config's backend, opened with the config's device
/// options, and the run's plan on them.
OpenedRun open_configured_run(const CommonOptions& common, const RunConfig& config,
                              const WorldShape& world, bool plan_only);

/// `collective: mpi` runs one replica per rank: only tasks that train can.
void check_collective(const Task& task, const RunConfig& config);

/// Runs `step` (a task's plan or run); a tensor over the kernels' limit
/// comes from the batch and the model's dimensions, so the error names
/// batch.micro where the config gave it.
template <class Step>
auto naming_the_batch(const RunConfig& config, Step&& step) {
  try {
    return step();
  } catch (const TensorTooLargeError& e) {
    if (!config.schema || !config.schema->reads("batch")) throw;
    config.fail("batch.micro",
                fmt::format("{} sequences of {} tokens: {}; lower batch.micro (or model.seq_len)",
                            config.batch.micro, config.model.seq_len, e.what()));
  }
}

}  // namespace polyhal
