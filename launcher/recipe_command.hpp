#pragma once
// `polyhal run RECIPE` and `polyhal validate RECIPE`: the stages of a
// multi-stage recipe (polyhal/app/recipe.hpp), in order.
#include "commands.hpp"

namespace polyhal {

/// Runs (or with `validate_only`, validates) every stage of the recipe
/// `run.config`: the command line's --backend and --set apply to every
/// stage after the recipe's own. A finished stage (DIR/NAME.done.json) is
/// skipped; an interrupted one resumes from its checkpoints; the first
/// failing stage ends the recipe with its exit code. Prints a summary of
/// every stage.
int run_recipe(const CommonOptions& common, const RunOptions& run, bool validate_only);

/// `config show RECIPE`: each stage's resolved config, as `config show`
/// shows one (the recipe's overrides, then the command line's).
int show_recipe_config(const CommonOptions& common, const RunOptions& run);

}  // namespace polyhal
