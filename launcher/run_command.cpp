// `polyhal run`, `validate` and `config`: a config (or a recipe of them)
// run, checked or shown; `run --max-restarts N` supervised.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "command_table.hpp"
#include "commands.hpp"
#include "polyhal/app/config_keys.hpp"
#include "polyhal/app/mpi_collective.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/app/task.hpp"
#include "polyhal/error.hpp"
#include "recipe_command.hpp"

namespace polyhal {
namespace {

void require_config(const CommandLine& cl) {
  if (cl.run.config.empty())
    throw UsageError(
        fmt::format("'{}' needs --config FILE (or the config as its first argument)\n{}",
                    cl.command, command_help(cl.command)));
}

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

}  // namespace

int run_command(CommandLine& cl, int argc, char** argv) {
  require_config(cl);
  if (cl.max_restarts) return supervise_run(cl, argc, argv);
  if (is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, false);
  return run_workload(cl.common, cl.run);
}

int validate_command(CommandLine& cl, int, char**) {
  require_config(cl);
  if (is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, true);
  return validate_config(cl.common, cl.run);
}

int config_command(CommandLine& cl, int, char**) {
  if (cl.config_action == "reference") {
    std::cout << config_reference_markdown(task_schemas());
    return 0;
  }
  require_config(cl);
  // The reader validate and run use: the same file:line errors.
  return show_config(cl.common, cl.run);
}

}  // namespace polyhal
