// `polyhal run`: a config (or a recipe of them) run in this process, or as
// one rank of an mpirun job; `run --max-restarts N` supervised.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "log_file_sink.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/app/run_outputs.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "recipe_command.hpp"
#include "run_setup.hpp"
#include "stop_signals.hpp"

namespace polyhal {
namespace {

/// `run --max-restarts N`: this command line without the option, supervised.
/// Under mpirun a rank cannot restart alone, and a run without checkpoints
/// would start over: both are usage errors.
int supervise_run(const CommandLine& cl, int argc, char** argv) {
  if (MpiRuntime::launched_by_mpirun())
    throw UsageError(
        "--max-restarts under mpirun: one rank cannot restart alone; supervise mpirun instead: "
        "polyhal supervise --max-restarts N -- mpirun ... polyhal run CONFIG");
  const RunConfig config = loaded_config(cl.run);
  const auto keys = task_keys(*config.schema);
  const bool checkpoints = std::any_of(
      keys.begin(), keys.end(), [](const ConfigKey* key) { return key->path == "checkpoint.dir"; });
  if (!checkpoints || config.checkpoint.dir.empty() || !config.checkpoint.resume)
    throw UsageError(fmt::format(
        "--max-restarts restarts a training run from its last checkpoint: {} (set checkpoint.dir "
        "and keep checkpoint.resume true)",
        !checkpoints                    ? fmt::format("task '{}' writes none", config.task)
        : config.checkpoint.dir.empty() ? "checkpoint.dir is not set"
                                        : "checkpoint.resume is false"));
  std::vector<std::string> command{std::filesystem::read_symlink("/proc/self/exe").string()};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--max-restarts") {
      ++i;
      continue;
    }
    if (arg.starts_with("--max-restarts=")) continue;
    command.emplace_back(arg);
  }
  return supervise(command, *cl.max_restarts);
}

/// Runs a task's `step` and then checks its log file.
template <class Step>
int logged(const std::shared_ptr<LogFileSink>& log, Step&& step) {
  const int code = step();
  if (log) log->check();
  return code;
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

}  // namespace

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

int run_workload(const CommonOptions& common, const RunOptions& given) {
  const RunConfig config = loaded_config(given);
  check_output_paths(config);
  // --compile-only plans a config for wherever it will run: its data need not be here.
  if (!given.compile_only) check_input_paths(config);
  check_run_outputs(given);
  probe_selected_backend(search_options(common, config.plugin_paths, config.backend));
  // Before any thread starts (MPI, OpenMP): SIGINT, SIGTERM and SIGUSR1 then
  // stop training after its step, with a checkpoint; the run exits 130 / 143 / 138.
  StopSignals stop;
  RunOptions run = given;
  run.stop_signal = &stop.requested();
  run.stop_listeners = &stop.listeners();
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

int run_command(CommandLine& cl, int argc, char** argv) {
  require_config(cl);
  if (cl.max_restarts) return supervise_run(cl, argc, argv);
  if (is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, false);
  return run_workload(cl.common, cl.run);
}

}  // namespace polyhal
