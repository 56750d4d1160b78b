#include "tasks/tokenizer_settings.hpp"

#include <spdlog/spdlog.h>

#include "polyhal/app/tokenizer_files.hpp"

namespace polyhal {

TokenizerOptions tokenizer_options(const RunConfig& config, SpecialTokensInText default_special) {
  TokenizerOptions options;
  options.special = config.data.special_tokens.value_or(default_special);
  options.lower_case = config.data.lower_case;
  if (config.data.vocab.empty()) return options;
  const auto files = read_tokenizer_files(config.data.vocab);
  options.max_chars_per_word = files.max_chars_per_word;
  const bool given = config.lines.contains("data.lower_case") ||
                     config.overrides.contains("data.lower_case") ||
                     config.overrides.contains("data");
  if (!files.lower_case) return options;
  if (!given) {
    options.lower_case = *files.lower_case;
  } else if (config.data.lower_case != *files.lower_case) {
    spdlog::warn("data.lower_case {} overrides do_lower_case {} of the tokenizer files beside {}",
                 config.data.lower_case, *files.lower_case, config.data.vocab.string());
  }
  return options;
}

}  // namespace polyhal
