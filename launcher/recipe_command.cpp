#include "recipe_command.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "polyhal/app/checked_file.hpp"
#include "polyhal/app/json_input.hpp"
#include "polyhal/app/recipe.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// The stage's run: the recipe's overrides, then the command line's.
RunOptions stage_options(const Recipe& recipe, const RecipeStage& stage, const RunOptions& run) {
  RunOptions s = run;
  s.config = stage.config;
  s.overrides = stage.overrides;
  s.override_origins = stage.origins;
  for (std::size_t i = 0; i < run.overrides.size(); ++i) {
    s.overrides.push_back(run.overrides[i]);
    s.override_origins.push_back(i < run.override_origins.size() ? run.override_origins[i] : "");
  }
  if (!run.backend && !recipe.backend.empty()) s.backend = recipe.backend;
  const auto metrics = recipe.dir / (stage.name + ".metrics");
  s.metrics_out = metrics.string() + ".jsonl";
  if (!run.metrics_csv.empty()) s.metrics_csv = metrics.string() + ".csv";
  if (!run.tensorboard_dir.empty()) s.tensorboard_dir = run.tensorboard_dir / stage.name;
  return s;
}

nlohmann::json last_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last.empty() ? nlohmann::json::object() : parse_json_input_or_discarded(last);
}

/// DIR/NAME.done.json, written whole or not at all.
void mark_done(const std::filesystem::path& marker, const nlohmann::json& record) {
  const auto partial = marker.string() + ".partial";
  {
    CheckedFile out(partial, "recipe stage record");
    out.append(record.dump(2) + "\n");
    out.sync();
  }
  std::filesystem::rename(partial, marker);
}

/// What a person wants to see of a stage's summary.
std::string result_text(const nlohmann::json& summary) {
  std::string out;
  const auto add = [&](const std::string& text) { out += (out.empty() ? "" : ", ") + text; };
  if (summary.contains("task") && summary["task"].is_string())
    add(summary["task"].get<std::string>());
  if (summary.contains("steps_run"))
    add(fmt::format("{} steps", json_excerpt(summary["steps_run"])));
  if (summary.contains("final_loss") && summary["final_loss"].is_number())
    add(fmt::format("final loss {:.4f}", summary["final_loss"].get<double>()));
  for (const auto& [name, value] : summary.items()) {
    if (name.starts_with("eval_") && value.is_number() && name != "eval_step")
      add(fmt::format("{} {:.4g}", name, value.get<double>()));
  }
  // Fine-tuning's last evaluation (EM and F1, accuracy, ...): its metrics.
  if (summary.contains("eval") && summary["eval"].is_object())
    for (const auto& [name, value] : summary["eval"].items())
      if (value.is_number() && name != "step" && name != "epoch")
        add(fmt::format("{} {:.4g}", name, value.get<double>()));
  return out;
}

}  // namespace

int show_recipe_config(const CommonOptions& common, const RunOptions& run) {
  const Recipe recipe = read_recipe(run.config);
  const auto count = recipe.stages.size();
  for (std::size_t i = 0; i < count; ++i) {
    std::cout << fmt::format("stage {}/{} {} ({}):\n", i + 1, count, recipe.stages[i].name,
                             recipe.stages[i].config.string())
              << std::flush;
    if (const int code = show_config(common, stage_options(recipe, recipe.stages[i], run)))
      return code;
  }
  return 0;
}

int run_recipe(const CommonOptions& common, const RunOptions& run, bool validate_only) {
  const Recipe recipe = read_recipe(run.config);
  std::vector<RunOptions> runs;
  std::vector<RunConfig> configs;
  for (const auto& stage : recipe.stages) {
    runs.push_back(stage_options(recipe, stage, run));
    configs.push_back(loaded_config(runs.back()));
  }
  check_stage_inputs(recipe, configs);
  const auto count = recipe.stages.size();
  if (validate_only) {
    int worst = 0;
    for (std::size_t i = 0; i < count; ++i) {
      std::cout << fmt::format("stage {}/{} {} ({}):\n", i + 1, count, recipe.stages[i].name,
                               recipe.stages[i].config.string());
      // A later stage starts from what an earlier one writes.
      if (i > 0) runs[i].inputs_made_earlier = {"checkpoint.init"};
      worst = std::max(worst, validate_config(common, runs[i]));
    }
    return worst;
  }
  std::filesystem::create_directories(recipe.dir);
  struct Done {
    std::string status;
    nlohmann::json summary;
    double seconds = 0;
  };
  std::vector<Done> done;
  for (std::size_t i = 0; i < count; ++i) {
    const RecipeStage& stage = recipe.stages[i];
    const auto marker = recipe.dir / (stage.name + ".done.json");
    if (!run.compile_only && std::filesystem::exists(marker)) {
      std::ifstream in(marker);
      const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      const auto record = parse_json_input_or_discarded(text);
      std::cout << fmt::format("stage {}/{} {}: finished before ({}), skipped\n", i + 1, count,
                               stage.name, marker.string());
      // Written by polyhal; a field of another type (an edited or damaged
      // file) is left out of the table, not fatal: the stage is done.
      nlohmann::json summary, seconds;
      if (record.is_object()) {
        summary = record.value("summary", nlohmann::json{});
        seconds = record.value("seconds", nlohmann::json{});
      }
      if (!summary.is_null() && !summary.is_object()) {
        spdlog::warn("{}: 'summary' is not an object; left out", marker.string());
        summary = nullptr;
      }
      if (!seconds.is_null() && !seconds.is_number()) {
        spdlog::warn("{}: 'seconds' is not a number; left out", marker.string());
        seconds = nullptr;
      }
      done.push_back({"done before", summary, seconds.is_number() ? seconds.get<double>() : 0.0});
      continue;
    }
    std::cout << fmt::format("stage {}/{} {}: {} ({})\n", i + 1, count, stage.name,
                             stage.config.string(), configs[i].task)
              << std::flush;
    const auto begin = std::chrono::steady_clock::now();
    int code = 0;
    try {
      code = run_workload(common, runs[i]);
    } catch (const Error&) {
      std::cout << fmt::format("stage {} failed: run the recipe again to resume it\n", stage.name);
      throw;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (code != 0) {
      std::cout << fmt::format("stage {} failed (exit {}): run the recipe again to resume it\n",
                               stage.name, code);
      return code;
    }
    const auto summary = last_line(runs[i].metrics_out);
    if (!run.compile_only) {
      mark_done(marker, {{"stage", stage.name},
                         {"config", stage.config.string()},
                         {"finished", static_cast<std::int64_t>(std::time(nullptr))},
                         {"seconds", seconds},
                         {"summary", summary}});
    }
    done.push_back({run.compile_only ? "planned" : "ran", summary, seconds});
  }
  std::cout << fmt::format("recipe {}: {} stages\n", recipe.file.string(), count);
  for (std::size_t i = 0; i < count; ++i) {
    std::cout << fmt::format("  {:<12} {:<12} {:>8.1f} s  {}\n", recipe.stages[i].name,
                             done[i].status, done[i].seconds, result_text(done[i].summary));
  }
  return 0;
}

}  // namespace polyhal
