#pragma once
/// @file recipe.hpp
/// A multi-stage recipe: one YAML file that chains configs (phase 1, phase 2
/// from phase 1's export, fine-tuning from phase 2's), each with its own
/// overrides. `polyhal run RECIPE` runs the stages in order, skips the
/// finished ones and resumes an interrupted one from its checkpoints
/// (docs/pretraining.md, "Multi-stage recipes"):
///
///   dir: runs/bert-base            # finished stages are recorded here
///   backend: cpu                   # optional: every stage's (--backend wins)
///   set: {model.precision: mixed}  # optional: every stage's overrides
///   stages:
///     - name: phase1
///       config: pretrain-bert-base-phase1-cpu.yaml   # relative to the recipe
///       set: {checkpoint.dir: runs/bert-base/phase1}
///     - name: phase2
///       config: pretrain-bert-base-phase2-cpu.yaml
///       set: {checkpoint.dir: runs/bert-base/phase2, checkpoint.init: runs/bert-base/phase1/hf}
#include <filesystem>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/config.hpp"

namespace polyhal {

struct RecipeStage {
  std::string name;
  std::filesystem::path config;        ///< resolved against the recipe's folder
  std::vector<std::string> overrides;  ///< "key.path=value": the recipe's, then the stage's
  std::vector<std::string> origins;    ///< "recipe.yaml:12" for each override
  std::string where;                   ///< "recipe.yaml:9": the stage's entry
};

struct Recipe {
  std::filesystem::path file;
  std::filesystem::path dir;  ///< DIR/<stage>.done.json marks a finished stage
  std::string backend;        ///< empty: each config's own
  std::vector<RecipeStage> stages;
};

/// Whether `file` is a recipe: a YAML mapping with a `stages` key.
bool is_recipe(const std::filesystem::path& file);

/// Reads a recipe; ConfigError naming file:line and key for an unknown key,
/// a missing name or config, a duplicate stage name or a config that does
/// not exist.
Recipe read_recipe(const std::filesystem::path& file);

/// Checks that each stage's checkpoint.init (in `configs`, the stages read
/// in order) exists or lies in an output directory of an earlier stage
/// (checkpoint.dir, finetune.output_dir, ...); ConfigError naming the
/// stage, the key and where it was set otherwise.
void check_stage_inputs(const Recipe& recipe, const std::vector<RunConfig>& configs);

}  // namespace polyhal
