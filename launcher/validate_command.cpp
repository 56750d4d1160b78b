// `polyhal validate`: every check `run` makes before its first step, and
// the plan it would follow.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "command_table.hpp"
#include "polyhal/app/html_reports.hpp"
#include "polyhal/app/metrics_writer.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/app/run_outputs.hpp"
#include "polyhal/app/run_report.hpp"
#include "polyhal/app/safetensors.hpp"
#include "recipe_command.hpp"
#include "run_setup.hpp"

namespace polyhal {
namespace {

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

/// The header of each safetensors file the config starts from: validate
/// says ok only for weights run can read (not a truncated file).
void check_weight_headers(const RunConfig& config, const ModelPlan& card) {
  for (const auto& [key, file] :
       {std::pair{card.weights_key, card.weights},
        std::pair{std::string("checkpoint.init"), config.checkpoint.init}}) {
    std::error_code ec;
    if (file.extension() != ".safetensors" || !std::filesystem::is_regular_file(file, ec)) continue;
    try {
      (void)read_safetensors_metadata(file);
    } catch (const ConfigError& e) {
      throw config.error(key, e.what());
    }
  }
}

}  // namespace

/// Every check `run` makes before its first step, short of allocating: the
/// config, output places, the plugin (loaded as run loads it), device
/// options, the task and collective, every op against the device's
/// kernels, the data, and the memory plan. Same exit codes as `run`: a plan
/// that does not fit is exit 1, as `run` fails to allocate it.
int validate_config(const CommonOptions& common, const RunOptions& run) {
  const RunConfig config = loaded_config(run);
  check_output_paths(config);
  if (!run.skip_inputs) {
    check_input_paths(config, run.inputs_made_earlier);
  }
  check_run_outputs(run);
  const Task& task = task_named(config);
  check_collective(task, config);
  const auto plugin_search = search_options(common, config.plugin_paths, config.backend);
  probe_selected_backend(plugin_search);
  PluginLoader loader(plugin_search);
  auto backend = loader.backend(config.backend);
  const OpenedRun opened = open_and_resolve(
      *backend, config.resolve_device(backend->device_options()), config, WorldShape{}, true);
  if (!run.skip_inputs) check_weight_headers(config, opened.plan.model);
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

int validate_command(CommandLine& cl, int, char**) {
  require_config(cl);
  if (is_recipe(cl.run.config)) return run_recipe(cl.common, cl.run, true);
  return validate_config(cl.common, cl.run);
}

}  // namespace polyhal
