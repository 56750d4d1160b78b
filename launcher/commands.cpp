#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <array>
#include <charconv>
#include <chrono>
#include <iostream>

#include "metrics_writer.hpp"
#include "polyhal/config.hpp"
#include "polyhal/error.hpp"
#include "polyhal/mpi_collective.hpp"
#include "polyhal/plugin_loader.hpp"
#include "report.hpp"
#include "task.hpp"

namespace polyhal::launcher {
namespace {

PluginSearchOptions search_options(const CommonOptions& common,
                                   const std::vector<std::filesystem::path>& config_paths = {},
                                   bool config_allows_world_writable = false) {
  PluginSearchOptions options;
  options.explicit_dirs = common.plugin_paths;
  options.explicit_dirs.insert(options.explicit_dirs.end(), config_paths.begin(),
                               config_paths.end());
  options.executable_dir = common.executable_dir;
  options.allow_world_writable =
      common.allow_world_writable_plugins || config_allows_world_writable;
  return options;
}

void print_device(const Device& device) {
  const auto& p = device.properties();
  std::cout << fmt::format("{}  [{}]  {} {}  mode: {}\n", p.name, p.backend, p.vendor, p.product,
                           device_mode_name(p.mode));
  std::size_t width = 4;
  for (const auto& row : p.table) width = std::max(width, row.name.size());
  for (const auto& row : p.table) {
    std::cout << fmt::format("  {:<{}}  {:<28}  {:<9}  {}\n", row.name, width, row.value,
                             provenance_name(row.source), row.note);
  }
}

/// The devices of `backend`. A device model also checks that the
/// modelled system holds the config's replicas, one device each (`replicas`:
/// batch.replicas, or the MPI ranks), e.g. 256 replicas on an IPU-POD4.
/// `device.ipus_per_replica` (IPU): a replica's pipeline stages go one per
/// IPU, as Graphcore's --ipus-per-replica. `auto` takes model.pipeline's
/// stage count; a number without model.pipeline balances that many stages
/// (model.pipeline: N); a number that disagrees with model.pipeline is an
/// error naming both keys.
void apply_ipus_per_replica(const DeviceOptions& options, RunConfig& config) {
  const auto it = options.find("ipus_per_replica");
  if (it == options.end() || it->second == "auto") return;
  const std::string where = config.locate("device.ipus_per_replica");
  std::int64_t ipus = 0;
  const auto [end, ec] =
      std::from_chars(it->second.data(), it->second.data() + it->second.size(), ipus);
  if (ec != std::errc{} || end != it->second.data() + it->second.size() || ipus < 1 ||
      ipus > 1024) {
    throw ConfigError(fmt::format(
        "{}: key 'device.ipus_per_replica': expected auto or a whole number in [1, 1024], got '{}'",
        where, it->second));
  }
  const auto stages = static_cast<std::int64_t>(config.model.pipeline.size());
  const bool pipelined = stages > 0 || config.model.pipeline_stages > 0;
  if (!pipelined) {
    if (ipus > 1) config.model.pipeline_stages = ipus;
    return;
  }
  const std::int64_t given = stages > 0 ? stages : config.model.pipeline_stages;
  if (given != ipus) {
    throw ConfigError(fmt::format(
        "{}: key 'device.ipus_per_replica': {} IPUs per replica, but model.pipeline ({}) has {} "
        "stage{}: each stage runs on its own IPU; give {} stages or set ipus_per_replica to {}",
        where, ipus, config.locate("model.pipeline"), given, given == 1 ? "" : "s", ipus, given));
  }
}

std::vector<std::shared_ptr<Device>> open_checked_devices(Backend& backend,
                                                          const DeviceOptions& options,
                                                          RunConfig& config,
                                                          std::int64_t replicas) {
  apply_ipus_per_replica(options, config);
  auto devices = backend.open_devices(options);
  if (devices.empty()) {
    throw DeviceUnavailableError(fmt::format("backend '{}' opened no devices", backend.name()));
  }
  const auto& p = devices.front()->properties();
  // A pipelined replica takes one device per stage.
  const std::int64_t stages =
      config.model.pipeline_stages > 0
          ? config.model.pipeline_stages
          : std::max<std::int64_t>(1, static_cast<std::int64_t>(config.model.pipeline.size()));
  if (p.mode == DeviceMode::model &&
      replicas * stages > static_cast<std::int64_t>(devices.size())) {
    throw ConfigError(fmt::format(
        "{}: key 'batch.replicas': {} replicas x {} pipeline stage{} need {} devices, but the "
        "modelled {} has {} ({}): use fewer replicas or a larger system",
        config.locate("batch.replicas"), replicas, stages, stages == 1 ? "" : "s",
        replicas * stages, backend.name(), devices.size(), p.product));
  }
  return devices;
}

std::vector<Device*> raw(const std::vector<std::shared_ptr<Device>>& devices) {
  std::vector<Device*> out;
  for (const auto& d : devices) out.push_back(d.get());
  return out;
}

/// The devices of the config's backend, opened with the config's device
/// options. Each device keeps its plugin library loaded.
std::vector<std::shared_ptr<Device>> open_configured_devices(const CommonOptions& common,
                                                             RunConfig& config,
                                                             std::int64_t replicas) {
  PluginLoader loader(
      search_options(common, config.plugin_paths, config.allow_world_writable_plugins));
  auto backend = loader.backend(config.backend);
  return open_checked_devices(*backend, config.resolve_device(backend->device_options()), config,
                              replicas);
}

void configure_logging(const RunConfig& config) {
  // The command line's --log-level wins when it asked for more detail.
  const auto level = std::min(spdlog::get_level(), spdlog::level::from_str(config.log_level));
  spdlog::set_level(level);
  if (!config.log_file.empty()) {
    auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(config.log_file.string(), true);
    sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%l] %v");
    spdlog::default_logger()->sinks().push_back(sink);
  }
}

}  // namespace

int list_plugins(const CommonOptions& common) {
  const auto options = search_options(common);
  std::cout << "search path (first wins):\n";
  int index = 1;
  for (const auto& dir : plugin_search_dirs(options)) {
    std::error_code ec;
    std::cout << fmt::format("  {}. {} ({}){}\n", index++, dir.path.string(), dir.origin,
                             std::filesystem::is_directory(dir.path, ec) ? "" : " [missing]");
  }
  PluginLoader loader(options);
  std::cout << "plugins:\n";
  if (loader.candidates().empty()) std::cout << "  none found\n";
  for (const auto& c : loader.candidates()) {
    if (c.status == PluginCandidate::Status::loaded) {
      std::cout << fmt::format("  {:<8} {:<8} ABI {:<5} loaded    {}\n           {}\n", c.name,
                               c.version, c.abi, c.path.string(), c.summary);
    } else {
      std::cout << fmt::format("  {:<8} {:<8} {:<9} {:<9} {}\n           reason: {}\n",
                               c.name.empty() ? "?" : c.name, c.version.empty() ? "-" : c.version,
                               c.abi.empty() ? "-" : "ABI " + c.abi, plugin_status_name(c.status),
                               c.path.string(), c.reason);
    }
  }
  const auto names = loader.backend_names();
  std::cout << fmt::format("backends: {}\n",
                           names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  return 0;
}

int list_devices(const CommonOptions& common, const std::optional<std::string>& backend_name,
                 const std::vector<std::string>& overrides) {
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
  PluginLoader loader(search_options(common));
  std::vector<std::string> names =
      backend_name ? std::vector{*backend_name} : loader.backend_names();
  if (names.empty()) throw PluginError("no backends are loaded; run 'polyhal plugins' to see why");
  for (const auto& name : names) {
    auto backend = loader.backend(name);
    const auto options = resolve_device_options(backend->device_options(), given);
    for (const auto& device : backend->open_devices(options)) print_device(*device);
  }
  return 0;
}

int validate_config(const CommonOptions& common, const RunOptions& run) {
  RunConfig config = load_run_config(run.config, run.overrides, task_schemas());
  if (run.backend) config.backend = *run.backend;
  PluginLoader loader(
      search_options(common, config.plugin_paths, config.allow_world_writable_plugins));
  auto backend = loader.backend(config.backend);
  const auto device =
      open_checked_devices(*backend, config.resolve_device(backend->device_options()), config,
                           config.batch.replicas)
          .front();
  // The run's plan-time checks: an op the device lacks, data that cannot be
  // read or a model that cannot be built fails here as it would at `run`.
  const std::string plan = task_named(config).plan(*device, config);
  std::cout << fmt::format("{}: ok (backend {}, task {}; {})\n", run.config.string(),
                           config.backend, config.task, plan);
  return 0;
}

/// `collective: mpi`: this process is one rank of an mpirun job and one
/// replica. Rank 0 reports (stdout, metrics, checkpoints); the others only
/// log warnings and errors, prefixed with their rank. Any error on any rank
/// tears the whole job down (MPI_Abort) with that error's exit code, so no
/// rank is left waiting for a peer that will never come.
int run_mpi_pretraining(const CommonOptions& common, const RunOptions& run, RunConfig config) {
  const Task& task = task_named(config);
  if (!task.multi_process()) {
    throw ConfigError(fmt::format(
        "{}: key 'collective': mpi applies to the training tasks (pretrain, squad, glue), not {}",
        config.locate("collective"), config.task));
  }
  MpiRuntime mpi;
  const int rank = mpi.rank();
  try {
    const auto world = make_mpi_communicator(
        mpi, std::chrono::milliseconds(
                 static_cast<std::int64_t>(config.collective.timeout_seconds * 1000.0)));
    RunOptions options = run;
    std::streambuf* saved_cout = std::cout.rdbuf();
    if (rank != 0) {
      options.metrics_out.clear();
      std::cout.rdbuf(nullptr);  // only rank 0 prints progress
    }
    configure_logging(config);
    if (rank != 0) {
      spdlog::set_level(spdlog::level::warn);
      spdlog::set_pattern(fmt::format("[rank {}] [%l] %v", rank));
    }
    MetricsWriter metrics(options.metrics_out);
    const auto opened = open_configured_devices(common, config, mpi.size());
    const auto& device = opened.front();
    spdlog::info("rank {} of {}: backend {} device {}", rank, mpi.size(), config.backend,
                 device->name());
    const int code = task.run(*device, config, options, metrics, world.get(), raw(opened));
    world->barrier();  // nobody finalises while a peer still needs it
    std::cout.rdbuf(saved_cout);
    return code;
  } catch (const Error& e) {
    std::cerr << fmt::format("polyhal: error: rank {} of {}: {}\n", rank, mpi.size(), e.what());
    if (mpi.size() > 1) mpi.abort(static_cast<int>(e.exit_code()));
    throw;
  } catch (const std::exception& e) {
    std::cerr << fmt::format("polyhal: error: rank {} of {}: {}\n", rank, mpi.size(), e.what());
    if (mpi.size() > 1) mpi.abort(static_cast<int>(ExitCode::failure));
    throw;
  }
}

int run_workload(const CommonOptions& common, const RunOptions& run) {
  RunConfig config = load_run_config(run.config, run.overrides, task_schemas());
  if (run.backend) config.backend = *run.backend;
  if (config.collective.engine == "mpi") return run_mpi_pretraining(common, run, config);
  configure_logging(config);
  MetricsWriter metrics(run.metrics_out);
  const auto opened = open_configured_devices(common, config, config.batch.replicas);
  const auto& device = opened.front();

  spdlog::info("backend {} device {} ({}, mode {})", config.backend, device->name(),
               device->properties().product, device_mode_name(device->properties().mode));
  return task_named(config).run(*device, config, run, metrics, nullptr, raw(opened));
}

}  // namespace polyhal::launcher
