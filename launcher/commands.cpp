#include "commands.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <array>
#include <chrono>
#include <iostream>

#include "log_file_sink.hpp"
#include "polyhal/app/config.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/run_outputs.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/app/tensor_limit.hpp"
#include "polyhal/error.hpp"
#include "stop_signals.hpp"

namespace polyhal {
namespace {

/// Where to look for plugins. Permission to load from writable places comes
/// from the command line only, never from a config file.
PluginSearchOptions search_options(const CommonOptions& common,
                                   const std::vector<std::filesystem::path>& config_paths = {},
                                   std::optional<std::string> only_backend = {}) {
  PluginSearchOptions options;
  options.explicit_dirs = common.plugin_paths;
  options.explicit_dirs.insert(options.explicit_dirs.end(), config_paths.begin(),
                               config_paths.end());
  options.executable_dir = common.executable_dir;
  options.allow_world_writable = common.allow_world_writable_plugins;
  options.only_backend = std::move(only_backend);
  return options;
}

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

/// Loads the selected backend's plugin once in a child process before this
/// process loads it: a plugin that crashes or hangs while loading is then
/// an error (exit 3) naming the signal, not a crash of the launcher. Runs
/// before MPI is initialised and before any thread is started.
void probe_selected_backend(const PluginSearchOptions& options) {
  for (const auto& probed : probe_plugins(options)) {
    const PluginCandidate& c = probed.candidate;
    if (c.status == PluginCandidate::Status::crashed) {
      throw PluginError(fmt::format("backend '{}' is not available: its plugin {}: {}", c.name,
                                    c.path.string(), c.reason));
    }
  }
}

/// Opens `backend`'s devices. A plugin's own check of a device option
/// ("key 'device.cards': ...") gets the place the value came from.
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

std::vector<Device*> raw(const std::vector<std::shared_ptr<Device>>& devices) {
  std::vector<Device*> out;
  for (const auto& d : devices) out.push_back(d.get());
  return out;
}

/// The devices a run opened and its plan on them.
struct OpenedRun {
  std::vector<std::shared_ptr<Device>> devices;  ///< each keeps its plugin library loaded
  RunPlan plan;
  Device& device() const { return *devices.front(); }
};

/// Opens `backend`'s devices with `options` and resolves the run on them
/// (run_plan.hpp), logging what the plan decided once.
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

/// The devices of the config's backend, opened with the config's device
/// options, and the run's plan on them.
OpenedRun open_configured_run(const CommonOptions& common, const RunConfig& config,
                              const WorldShape& world, bool plan_only) {
  PluginLoader loader(search_options(common, config.plugin_paths, config.backend));
  auto backend = loader.backend(config.backend);
  return open_and_resolve(*backend, config.resolve_device(backend->device_options()), config, world,
                          plan_only);
}

/// Sets the log level and adds log.file's sink, returned so that the run
/// can check at its end that every line reached the file.
std::shared_ptr<LogFileSink> configure_logging(const CommonOptions& common,
                                               const RunConfig& config) {
  // The command line's --log-level, louder or quieter, beats the config's.
  if (!common.log_level_given) spdlog::set_level(spdlog::level::from_str(config.log_level));
  if (config.log_file.empty()) return nullptr;
  auto sink = std::make_shared<LogFileSink>(config.log_file);
  sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e [%l] %v");
  spdlog::default_logger()->sinks().push_back(sink);
  return sink;
}

/// Runs a task's `step` and then checks its log file.
template <class Step>
int logged(const std::shared_ptr<LogFileSink>& log, Step&& step) {
  const int code = step();
  if (log) log->check();
  return code;
}

}  // namespace

RunConfig loaded_config(const RunOptions& run) {
  RunConfig config =
      load_run_config(run.config, run.overrides, task_schemas(), run.override_origins);
  if (run.backend) config.backend = *run.backend;
  return config;
}

int list_plugins(const CommonOptions& common) {
  const auto options = search_options(common);
  std::cout << "search path (first wins):\n";
  int index = 1;
  for (const auto& dir : plugin_search_dirs(options)) {
    std::error_code ec;
    const std::string state = !dir.refused.empty() ? " [" + dir.refused + "]"
                              : std::filesystem::is_directory(dir.path, ec) ? ""
                                                                            : " [missing]";
    std::cout << fmt::format("  {}. {} ({}){}\n", index++, dir.path.string(), dir.origin, state);
  }
  // Each candidate loads in a child process: a crashing plugin is listed
  // with the signal, and nothing of any plugin runs in this process.
  const auto probed = probe_plugins(options);
  std::cout << "plugins:\n";
  if (probed.empty()) std::cout << "  none found\n";
  std::vector<std::string> names;
  for (const auto& [c, output, code, error] : probed) {
    if (c.status == PluginCandidate::Status::loaded) {
      names.push_back(c.name);
      std::cout << fmt::format("  {:<8} {:<8} ABI {:<5} loaded    {}\n           {}\n", c.name,
                               c.version, c.abi, c.path.string(), c.summary);
    } else {
      std::cout << fmt::format("  {:<8} {:<8} {:<9} {:<9} {}\n           reason: {}\n",
                               c.name.empty() ? "?" : c.name, c.version.empty() ? "-" : c.version,
                               c.abi.empty() ? "-" : "ABI " + c.abi, plugin_status_name(c.status),
                               c.path.string(), c.reason);
    }
  }
  std::sort(names.begin(), names.end());
  std::cout << fmt::format("backends: {}\n",
                           names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", ")));
  return 0;
}

/// A probe callback's error (what the plugin threw in the child), thrown
/// here with the exit code it carried.
[[noreturn]] void throw_probe_error(int code, const std::string& error) {
  throw Error(code >= 1 && code <= 4 ? static_cast<ExitCode>(code) : ExitCode::failure, error);
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

/// `config show`: the resolved config with every device option of its
/// backend, whose plugin is loaded in a child process as `devices` loads it.
/// A bad device option is the error `validate` gives (file:line, exit 2). A
/// backend that is not installed is a warning: the config is still shown,
/// with the device options it gives.
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

/// `collective: mpi` runs one replica per rank: only tasks that train can.
void check_collective(const Task& task, const RunConfig& config) {
  if (config.collective.engine == "mpi" && !task.multi_process()) {
    std::vector<std::string> multi;
    for (const auto& t : registered_tasks())
      if (t->multi_process()) multi.push_back(t->schema().name);
    throw ConfigError(
        fmt::format("{}: key 'collective': mpi applies to the training tasks ({}), not {}",
                    config.locate("collective"), fmt::join(multi, ", "), config.task));
  }
}

/// What a plan that does not fit can change, key by key (those not set
/// already): the same recipe on another backend often needs one of them.
std::string fit_advice(const RunConfig& config, const std::vector<OptionSpec>& device_options) {
  std::vector<std::string> keys;
  if (config.batch.micro > 1)
    keys.push_back(
        fmt::format("batch.micro (now {}; raise batch.grad_accum to keep the global batch)",
                    config.batch.micro));
  const bool trains = config.schema && config.schema->has(TaskTrait::trains);
  if (trains && config.model.recompute != "all")
    keys.push_back("model.recompute: all (activations recomputed in backward)");
  for (const auto& spec : device_options)
    if (spec.name == "ipus_per_replica")
      keys.push_back(
          fmt::format("device.{}.ipus_per_replica (a pipeline stage per device)", config.backend));
  if (trains && !config.optimizer.shard_state && config.batch.replicas > 1)
    keys.push_back("optimizer.shard_state: true (optimizer state split over the replicas)");
  if (keys.empty()) return {};
  return fmt::format("  to fit on {}, set: {}\n", config.backend, fmt::join(keys, "; "));
}

/// Every check `run` makes before its first step, short of allocating: the
/// config, output places, the plugin (loaded as run loads it), device
/// options, the task and collective, every op against the device's
/// kernels, the data, and the memory plan. Same exit codes as `run`: a plan
/// that does not fit is exit 1, as `run` fails to allocate it.
int validate_config(const CommonOptions& common, const RunOptions& run) {
  const RunConfig config = loaded_config(run);
  check_output_paths(config);
  if (!run.skip_inputs) check_input_paths(config, run.inputs_made_earlier);
  check_run_outputs(run);
  const Task& task = task_named(config);
  check_collective(task, config);
  const auto plugin_search = search_options(common, config.plugin_paths, config.backend);
  probe_selected_backend(plugin_search);
  PluginLoader loader(plugin_search);
  auto backend = loader.backend(config.backend);
  const OpenedRun opened = open_and_resolve(
      *backend, config.resolve_device(backend->device_options()), config, WorldShape{}, true);
  MetricsWriter nowhere({});
  const TaskContext context{opened.device(), raw(opened.devices), config, opened.plan, run,
                            nowhere};
  const PlanSummary plan = naming_the_batch(config, [&] { return task.plan(context); });
  std::cout << fmt::format("{}: {} (backend {}, task {}; {})\n", run.config.string(),
                           plan.fits ? "ok" : "DOES NOT FIT", config.backend, config.task,
                           plan.text);
  std::cout << plan_lines(opened.plan, opened.device());
  if (!plan.fits) std::cout << fit_advice(config, backend->device_options());
  if (!run.report_dir.empty()) {
    const auto page = naming_the_batch(config, [&] { return task.memory_page(context); });
    if (page) {
      const auto file = run.report_dir / "memory.html";
      write_html_report(file, memory_report_html(*page));
      std::cout << fmt::format("  memory report: {}\n", file.string());
    } else {
      spdlog::warn("--report: task {} has no memory plan to show", config.task);
    }
  }
  return plan.fits ? 0 : static_cast<int>(ExitCode::failure);
}

/// A key every rank of an MPI job must give the same value: not the places
/// a rank writes (per-node checkpoint directories, logs), nor where it
/// looks for plugins.
bool must_agree(const ConfigKey& key) {
  return key.output == OutputPath::none && !key.path.starts_with("log.") &&
         key.path != "plugin_paths" && key.path != "device" &&
         key.path != "allow_world_writable_plugins";
}

/// Characters of a key's value shown when ranks disagree (a multiple of 8).
constexpr std::size_t kShownValue = 128;

std::int64_t fingerprint(std::string_view text) {
  std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a
  for (const char c : text) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return static_cast<std::int64_t>(hash);
}

/// Every rank runs the same config, checked before the first collective of
/// the task: a different learning rate or seq_len would diverge silently, a
/// different model abort inside MPI. ConfigError naming the rank and keys.
void check_ranks_agree(const RunConfig& config, Communicator& world) {
  std::vector<const ConfigKey*> keys;
  for (const ConfigKey* key : task_keys(*config.schema))
    if (must_agree(*key)) keys.push_back(key);
  std::vector<std::int64_t> values;
  std::string all = config.task;
  for (const ConfigKey* key : keys) {
    const std::string value = key->value(config);
    values.push_back(fingerprint(value));
    all += "\n" + key->path + "=" + value;
  }
  const auto ranks = static_cast<std::size_t>(world.size());
  const std::array<std::int64_t, 2> mine{static_cast<std::int64_t>(keys.size()), fingerprint(all)};
  std::vector<std::int64_t> gathered(2 * ranks);
  world.all_gather(mine.data(), gathered.data(), 2, DType::i64);
  std::size_t other = 1;
  while (other < ranks && gathered[2 * other] == gathered[0] &&
         gathered[2 * other + 1] == gathered[1])
    ++other;
  if (other == ranks) return;
  std::string which = "its task or sections";
  if (gathered[2 * other] == gathered[0]) {  // the same keys: say which differ
    std::vector<std::int64_t> every(values.size() * ranks);
    world.all_gather(values.data(), every.data(), values.size(), DType::i64);
    std::vector<std::string> differ;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (every[other * values.size() + k] == every[k]) continue;
      // Every rank found the same keys, so all take part in this exchange.
      const std::string value = keys[k]->value(config);
      std::array<char, kShownValue> mine_text{};
      value.copy(mine_text.data(), std::min(value.size(), kShownValue - 1));
      std::vector<char> texts(kShownValue * ranks);
      world.all_gather(mine_text.data(), texts.data(), kShownValue / 8, DType::i64);
      differ.push_back(fmt::format("{} (rank 0: {}, rank {}: {})", keys[k]->path, texts.data(),
                                   other, texts.data() + other * kShownValue));
      if (differ.size() == 3) break;
    }
    which = fmt::format("{}", fmt::join(differ, "; "));
  }
  throw ConfigError(fmt::format(
      "{}: rank {}'s config differs from rank 0's in {} (config hash {:016x} on rank 0, {:016x} "
      "on rank {}): every rank of an MPI job must run the same config (only output places, log "
      "and device options may differ)",
      config.file.string(), other, which, static_cast<std::uint64_t>(gathered[1]),
      static_cast<std::uint64_t>(gathered[2 * other + 1]), other));
}

/// `collective: mpi`: this process is one rank of an mpirun job and one
/// replica. Rank 0 reports (stdout, metrics, checkpoints); the others only
/// log warnings and errors, prefixed with their rank. Any error on any rank
/// tears the whole job down (MPI_Abort) with that error's exit code, so no
/// rank is left waiting for a peer that will never come.
int run_as_mpi_rank(const CommonOptions& common, const RunOptions& run, const RunConfig& config) {
  const Task& task = task_named(config);
  check_collective(task, config);
  MpiRuntime mpi;
  const int rank = mpi.rank();
  try {
    const auto world = make_mpi_communicator(
        mpi, std::chrono::milliseconds(
                 static_cast<std::int64_t>(config.collective.timeout_seconds * 1000.0)));
    RunOptions options = run;
    std::streambuf* saved_cout = std::cout.rdbuf();
    if (rank != 0) {
      options.metrics_out.clear();  // only rank 0 writes metrics
      options.tensorboard_dir.clear();
      options.metrics_csv.clear();
      std::cout.rdbuf(nullptr);  // only rank 0 prints progress
    }
    const auto log = configure_logging(common, config);
    if (rank != 0) {
      spdlog::set_level(spdlog::level::warn);
      spdlog::set_pattern(fmt::format("%Y-%m-%d %H:%M:%S.%e [rank {}] [%l] %v", rank));
    }
    check_ranks_agree(config, *world);
    MetricsWriter metrics({options.metrics_out, options.tensorboard_dir, options.metrics_csv});
    const OpenedRun opened = open_configured_run(
        common, config, {mpi.size(), mpi.ranks_on_this_host(), true}, options.compile_only);
    spdlog::info("rank {} of {}: backend {} device {}", rank, mpi.size(), config.backend,
                 opened.device().name());
    const TaskContext context{opened.device(), raw(opened.devices), config, opened.plan, options,
                              metrics,         world.get()};
    const int code =
        logged(log, [&] { return naming_the_batch(config, [&] { return task.run(context); }); });
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
  } catch (...) {  // a plugin's own exception type: the peers must not wait for us
    std::cerr << fmt::format("polyhal: error: rank {} of {}: an exception of unknown type\n", rank,
                             mpi.size());
    if (mpi.size() > 1) mpi.abort(static_cast<int>(ExitCode::failure));
    throw;
  }
}

int run_workload(const CommonOptions& common, const RunOptions& given) {
  const RunConfig config = loaded_config(given);
  check_output_paths(config);
  // --compile-only plans a config for wherever it will run: its data need not be here.
  if (!given.compile_only) check_input_paths(config);
  check_run_outputs(given);
  probe_selected_backend(search_options(common, config.plugin_paths, config.backend));
  // Before any thread starts (MPI, OpenMP): SIGINT and SIGTERM then stop
  // training after its step, with a checkpoint, and the run exits 130 / 143.
  const StopSignals stop;
  RunOptions run = given;
  run.stop_signal = &stop.requested();
  if (config.collective.engine == "mpi")
    return stop.exit_code(run_as_mpi_rank(common, run, config));
  const auto log = configure_logging(common, config);
  MetricsWriter metrics({run.metrics_out, run.tensorboard_dir, run.metrics_csv});
  const OpenedRun opened = open_configured_run(common, config, WorldShape{}, run.compile_only);
  const Device& device = opened.device();
  spdlog::info("backend {} device {} ({}, mode {})", config.backend, device.name(),
               device.properties().product, device_mode_name(device.properties().mode));
  const TaskContext context{opened.device(), raw(opened.devices), config, opened.plan, run,
                            metrics};
  return stop.exit_code(logged(log, [&] {
    return naming_the_batch(config, [&] { return task_named(config).run(context); });
  }));
}

}  // namespace polyhal
