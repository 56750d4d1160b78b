#pragma once
// The tokenizer a run's config asks for: its data keys, then the settings
// a model directory ships beside its vocab.txt (polyhal/app/tokenizer_files.hpp).
#include "polyhal/app/config.hpp"
#include "polyhal/app/tokenizer.hpp"

namespace polyhal {

/// `config`'s tokenizer options for data.vocab. Lower-casing:
/// data.lower_case when the config gives it (with a warning if the
/// directory says otherwise), else the directory's, else true (BERT's
/// uncased default). Special tokens in text: data.special_tokens, else
/// `default_special` (the task's). Longest word: the directory's rule.
/// Throws ConfigError naming the file for a setting polyhal does not
/// implement.
TokenizerOptions tokenizer_options(const RunConfig& config, SpecialTokensInText default_special);

}  // namespace polyhal
