#pragma once
// model.dir: one key for a Hugging Face or sentence-transformers model
// directory (model_directory.cpp says which keys it stands for).
#include "polyhal/app/config.hpp"

namespace polyhal::config_sections {

/// Fills the keys model.dir stands for that the config does not give, and
/// says once where a given key differs from the directory. ConfigError at
/// model.dir for a directory that is not a model.
void read_model_directory(RunConfig& config);

}  // namespace polyhal::config_sections
