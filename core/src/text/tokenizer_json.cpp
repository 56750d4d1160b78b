#include "text/tokenizer_json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

// The model's vocabulary limit (docs/hardening.md).
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;

/// Places `token` at `id`, refusing an id out of range or taken twice.
void place(std::vector<std::string>& tokens, std::vector<bool>& placed, std::int64_t id,
           const std::string& token, const std::filesystem::path& file, const char* key) {
  if (id < 0 || id >= static_cast<std::int64_t>(tokens.size()))
    throw ConfigError(fmt::format("{}: \"{}\": token '{}' has id {}, outside 0 to {}",
                                  file.string(), key, token, id, tokens.size() - 1));
  const auto at = static_cast<std::size_t>(id);
  if (placed[at] && tokens[at] != token)
    throw ConfigError(fmt::format("{}: \"{}\": id {} is both '{}' and '{}'", file.string(), key, id,
                                  tokens[at], token));
  tokens[at] = token;
  placed[at] = true;
}

}  // namespace

std::vector<std::string> tokenizer_json_vocabulary(const nlohmann::json& pipeline,
                                                   const std::filesystem::path& file) {
  const auto model = pipeline.find("model");
  if (model == pipeline.end() || !model->is_object())
    throw ConfigError(
        fmt::format("{}: \"model\": expected the tokenizer's model object", file.string()));
  const auto type = model->find("type");
  const std::string kind =
      type != model->end() && type->is_string() ? type->get<std::string>() : std::string("(none)");
  if (kind != "WordPiece")
    throw ConfigError(fmt::format(
        "{}: \"model.type\": {}: polyhal reads a tokenizer.json whose model is WordPiece (BERT's); "
        "other models are not implemented yet",
        file.string(), kind));
  const auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object() || vocab->empty())
    throw ConfigError(
        fmt::format("{}: \"model.vocab\": expected an object of token: id", file.string()));
  // Added tokens may extend the vocabulary past model.vocab.
  std::int64_t size = static_cast<std::int64_t>(vocab->size());
  const auto added = pipeline.find("added_tokens");
  const bool has_added = added != pipeline.end() && added->is_array();
  if (has_added) {
    for (const auto& token : *added) {
      const auto id = token.is_object() ? token.find("id") : token.end();
      if (id != token.end() && id->is_number_integer())
        size = std::max(size, id->get<std::int64_t>() + 1);
    }
  }
  if (size > kMaxTokens)
    throw ConfigError(fmt::format("{}: \"model.vocab\": {} tokens, more than the {} a model holds",
                                  file.string(), size, kMaxTokens));
  std::vector<std::string> tokens(static_cast<std::size_t>(size));
  std::vector<bool> placed(tokens.size(), false);
  for (const auto& entry : vocab->items()) {
    if (!entry.value().is_number_integer())
      throw ConfigError(fmt::format("{}: \"model.vocab\": token '{}' has no integer id",
                                    file.string(), entry.key()));
    place(tokens, placed, entry.value().get<std::int64_t>(), entry.key(), file, "model.vocab");
  }
  if (has_added) {
    for (const auto& token : *added) {
      if (!token.is_object() || !token.contains("id") || !token.contains("content") ||
          !token["id"].is_number_integer() || !token["content"].is_string())
        throw ConfigError(
            fmt::format("{}: \"added_tokens\": each entry needs an integer id and a string content",
                        file.string()));
      place(tokens, placed, token["id"].get<std::int64_t>(), token["content"].get<std::string>(),
            file, "added_tokens");
    }
  }
  for (std::size_t i = 0; i < placed.size(); ++i)
    if (!placed[i])
      throw ConfigError(
          fmt::format("{}: \"model.vocab\": no token has id {} (ids run 0 to {} without a gap)",
                      file.string(), i, placed.size() - 1));
  return tokens;
}

}  // namespace polyhal
