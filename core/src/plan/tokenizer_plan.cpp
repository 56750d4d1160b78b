// The tokenizer a run's config asks for: its data keys over the settings a
// model directory ships beside its vocabulary (polyhal/app/tokenizer_files.hpp),
// resolved once for the model card (ModelPlan::tokenizer).
#include <spdlog/spdlog.h>

#include "plan/model_keys.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/tokenizer_files.hpp"

namespace polyhal {

TokenizerOptions resolve_tokenizer_options(const RunConfig& config,
                                           const std::filesystem::path& vocab) {
  TokenizerOptions options;
  // Text to embed or classify keeps "[SEP]" as text; training data splits
  // it into its special token, as the reference scripts' tokenizers do.
  const bool infers = config.schema && config.schema->has(TaskTrait::runs_inference);
  options.special = config.data.special_tokens.value_or(infers ? SpecialTokensInText::keep
                                                               : SpecialTokensInText::split);
  options.lower_case = config.data.lower_case;
  // validate may plan before the file exists; opening it says what is wrong.
  std::error_code ec;
  if (vocab.empty() || !std::filesystem::exists(vocab, ec)) return options;
  const auto files = read_tokenizer_files(vocab);
  options.max_chars_per_word = files.max_chars_per_word;
  const bool given = config.lines.contains("data.lower_case") ||
                     config.overrides.contains("data.lower_case") ||
                     config.overrides.contains("data");
  if (!files.lower_case) return options;
  if (files.casing_fixed) {
    if (given && config.data.lower_case != *files.lower_case)
      spdlog::warn(
          "{}: data.lower_case {} is not used: {}'s normaliser (not a BertNormalizer) "
          "decides its own casing",
          config.locate("data.lower_case"), config.data.lower_case, vocab.string());
    options.lower_case = *files.lower_case;
    return options;
  }
  if (!given) {
    options.lower_case = *files.lower_case;
  } else if (config.data.lower_case != *files.lower_case) {
    spdlog::warn("data.lower_case {} overrides do_lower_case {} of the tokenizer files beside {}",
                 config.data.lower_case, *files.lower_case, vocab.string());
  }
  if (vocab.extension() == ".json") options.bert_lowercase = options.lower_case;
  return options;
}

}  // namespace polyhal
