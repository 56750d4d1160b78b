#include "tasks/tokenizer_settings.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal {

bool tokenizer_lower_case(const RunConfig& config) {
  const bool given = config.lines.contains("data.lower_case") ||
                     config.overrides.contains("data.lower_case") ||
                     config.overrides.contains("data");
  const auto file = config.data.vocab.parent_path() / "tokenizer_config.json";
  if (config.data.vocab.empty() || !std::filesystem::exists(file)) return config.data.lower_case;
  detail::refuse_special_or_oversized_file(file, std::uintmax_t{1} << 20, "tokenizer config");
  nlohmann::json settings;
  try {
    std::ifstream in(file);
    settings = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  if (!settings.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object", file.string()));
  const auto unsupported = [&](const std::string& key, const std::string& why) {
    throw ConfigError(fmt::format(
        "{}: \"{}\": {}; polyhal's tokenizer is BERT's WordPiece (docs/bert.md, \"Text mode\")",
        file.string(), key, why));
  };
  if (settings.contains("tokenizer_class") && settings["tokenizer_class"].is_string()) {
    const auto name = settings["tokenizer_class"].get<std::string>();
    if (name != "BertTokenizer" && name != "BertTokenizerFast")
      unsupported("tokenizer_class", name + " is not BERT's WordPiece tokenizer");
  }
  const bool lower = settings.contains("do_lower_case") && settings["do_lower_case"].is_boolean()
                         ? settings["do_lower_case"].get<bool>()
                         : true;
  if (settings.contains("strip_accents") && settings["strip_accents"].is_boolean() &&
      settings["strip_accents"].get<bool>() != lower)
    unsupported("strip_accents", fmt::format("{} with do_lower_case {}: accents are stripped "
                                             "exactly when text is lower-cased here",
                                             settings["strip_accents"].dump(), lower));
  if (settings.value("tokenize_chinese_chars", true) == false)
    unsupported("tokenize_chinese_chars", "false: CJK characters are always split apart here");
  if (settings.value("do_basic_tokenize", true) == false)
    unsupported("do_basic_tokenize", "false: basic tokenization always runs here");
  if (settings.contains("never_split") && !settings["never_split"].is_null() &&
      !(settings["never_split"].is_array() && settings["never_split"].empty()))
    unsupported("never_split", "words kept whole are not implemented");
  if (given) {
    if (config.data.lower_case != lower)
      spdlog::warn("data.lower_case {} overrides {}'s do_lower_case {}", config.data.lower_case,
                   file.string(), lower);
    return config.data.lower_case;
  }
  return lower;
}

}  // namespace polyhal
