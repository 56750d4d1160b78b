// polyhal: the launcher. Parses the command line, then hands off to commands.cpp.
#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>

#include "cli.hpp"
#include "commands.hpp"
#include "polyhal/abi.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/app/plugin_loader.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "polyhal/op_schema.hpp"
#include "recipe_command.hpp"

namespace {

std::filesystem::path executable_dir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path{} : self.parent_path();
}

/// `run --max-restarts N`: this command line without the option, supervised.
/// Under mpirun a rank cannot restart alone, and a run without checkpoints
/// would start over: both are usage errors.
int supervise_run(const polyhal::CommandLine& cl, int argc, char** argv) {
  using namespace polyhal;
  if (MpiRuntime::launched_by_mpirun())
    throw UsageError(
        "--max-restarts under mpirun: one rank cannot restart alone; supervise mpirun instead: "
        "polyhal supervise --max-restarts N -- mpirun ... polyhal run CONFIG");
  const RunConfig config =
      load_run_config(cl.run.config, cl.run.overrides, task_schemas(), cl.run.override_origins);
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

int dispatch(int argc, char** argv) {
  using namespace polyhal;
  if (argc > 1 && std::string_view(argv[1]) == "__complete") {  // the shell's completion
    // The installed backends by their files' names: completion loads no plugin.
    PluginSearchOptions search;
    search.executable_dir = executable_dir();
    std::set<std::string> backends;
    for (const auto& found : detail::find_plugin_files(search)) backends.insert(found.first.name);
    std::cout << completion_candidates(std::vector<std::string>(argv + 2, argv + argc),
                                       std::vector<std::string>(backends.begin(), backends.end()));
    return 0;
  }
  CommandLine cl = parse_command_line(argc, argv);
  if (cl.version) {
    std::cout << fmt::format("polyhal {} (plugin ABI {}.{}, op schema {})\n", POLYHAL_VERSION,
                             polyhal::kAbiMajor, polyhal::kAbiMinor, polyhal::kOpSchemaVersion);
    return 0;
  }
  if (cl.help) {
    std::cout << (cl.help_topic.empty() ? overview_help() : command_help(cl.help_topic));
    return 0;
  }
  auto level = spdlog::level::from_str(cl.log_level);
  if (level == spdlog::level::off && cl.log_level != "off") {
    throw polyhal::UsageError(
        fmt::format("--log-level: unknown level '{}'; use trace, debug, info, warn, error or off",
                    cl.log_level));
  }
  // Logs go to stderr with a timestamp; results and summaries to stdout, so
  // `polyhal run ... > results.txt` keeps them apart.
  spdlog::set_default_logger(spdlog::stderr_color_mt("polyhal"));
  spdlog::set_level(level);
  spdlog::set_pattern(kLogPattern);

  cl.common.executable_dir = executable_dir();
  cl.common.log_level_given = cl.log_level_given;
  if (cl.backend) cl.run.backend = cl.backend;
  const std::string& command = cl.command;
  auto require_config = [&] {
    if (cl.run.config.empty())
      throw polyhal::UsageError(
          fmt::format("'{}' needs --config FILE (or the config as its first argument)\n{}", command,
                      command_help(command)));
  };
  if (command == "config") {
    if (cl.config_action == "reference") {
      std::cout << polyhal::config_reference_markdown(polyhal::task_schemas());
      return 0;
    }
    require_config();
    // The reader validate and run use: the same file:line errors.
    return show_config(cl.common, cl.run);
  }
  if (command == "plugins") return list_plugins(cl.common);
  if (command == "devices")
    return list_devices(cl.common, cl.run.backend, cl.run.overrides, cl.device_options);
  if (command == "validate") {
    require_config();
    if (polyhal::is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, true);
    return validate_config(cl.common, cl.run);
  }
  if (command == "supervise") {
    if (cl.inputs.empty())
      throw polyhal::UsageError(
          fmt::format("'supervise' needs the job's command after '--'\n{}", command_help(command)));
    return polyhal::supervise(cl.inputs, cl.max_restarts.value_or(3));
  }
  if (command == "run" && cl.max_restarts) {
    require_config();
    return supervise_run(cl, argc, argv);
  }
  if (command == "run") {
    require_config();
    if (polyhal::is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, false);
    return run_workload(cl.common, cl.run);
  }
  if (command == "pack") {
    if (cl.inputs.size() != 1 || cl.pack.output.empty())
      throw polyhal::UsageError(
          fmt::format("'pack' needs one --input and --output\n{}", command_help(command)));
    cl.pack.input = cl.inputs.front();
    return pack_data(cl.pack, cl.run.progress);
  }
  if (command == "convert") {
    if (cl.inputs.size() != 1 || cl.pack.output.empty())
      throw polyhal::UsageError(
          fmt::format("'convert' needs one --input and --output\n{}", command_help(command)));
    polyhal::ConvertOptions options;
    options.input = cl.inputs.front();
    options.output = cl.pack.output;
    options.bert_config = cl.bert_config;
    options.vocab = cl.vocab;
    options.lower_case = !cl.cased;
    if (cl.convert_to != "hf" && cl.convert_to != "checkpoint")
      throw polyhal::UsageError(fmt::format(
          "--to {}: expected hf (a Hugging Face directory) or checkpoint (a polyhal checkpoint "
          "directory to resume from)",
          cl.convert_to));
    options.to = cl.convert_to;
    return convert_model(options);
  }
  if (command == "report") {
    if (cl.inputs.empty())
      throw polyhal::UsageError(fmt::format(
          "'report' needs a metrics file (run --metrics-out) or a directory of them\n{}",
          command_help(command)));
    return write_run_report(cl.inputs,
                            cl.pack.output.empty() ? "polyhal-report.html" : cl.pack.output);
  }
  if (command == "prepare-data") {
    if (cl.inputs.empty() || cl.vocab.empty() || cl.pack.output.empty())
      throw polyhal::UsageError(fmt::format(
          "'prepare-data' needs --input, --vocab and --output\n{}", command_help(command)));
    if (cl.cased && cl.lower_case) throw polyhal::UsageError("--lower-case and --cased: give one");
    if (cl.special_tokens != "split" && cl.special_tokens != "keep")
      throw polyhal::UsageError(
          fmt::format("--special-tokens: expected split (BERT's reference) or keep, got '{}'",
                      cl.special_tokens));
    auto& prepare = cl.prepare;
    for (const auto& input : cl.inputs) prepare.inputs.emplace_back(input);
    prepare.vocab = cl.vocab;
    prepare.output = cl.pack.output;
    prepare.lower_case = !cl.cased;
    prepare.special_tokens = cl.special_tokens == "keep" ? polyhal::SpecialTokensInText::keep
                                                         : polyhal::SpecialTokensInText::split;
    if (cl.max_seq_len_given) prepare.max_seq_len = cl.pack.max_seq_len;
    std::optional<polyhal::PackOptions> packing;
    if (!cl.pack_after.empty()) {
      packing = cl.pack;
      packing->algorithm = cl.pack_after;
    }
    return prepare_data(prepare, packing, cl.run.progress);
  }
  throw polyhal::UsageError(fmt::format("no command given\n{}", overview_help()));
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads that wait for each other spin briefly, then sleep,
  // unless the user chose a policy: libgomp's default spin (300000 rounds)
  // beside other work on the host collapses a run (a waiting thread spins
  // while the one it waits for is descheduled), and sleeping at once costs
  // up to a fifth on an idle host; 1000 rounds keep both within 10% of the
  // best (bench/shared_host.py). Set before any plugin loads libgomp, which
  // reads it once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    ::setenv("GOMP_SPINCOUNT", "1000", 0);
  try {
    return dispatch(argc, argv);
  } catch (const polyhal::Error& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(e.exit_code());
  } catch (const std::exception& e) {
    std::cerr << "polyhal: error: " << e.what() << '\n';
    return static_cast<int>(polyhal::ExitCode::failure);
  } catch (...) {  // e.g. a plugin throwing something that is not a std::exception
    std::cerr << "polyhal: error: an exception of unknown type (not derived from "
                 "std::exception) reached the launcher\n";
    return static_cast<int>(polyhal::ExitCode::failure);
  }
}
