#include "model/sentence_modules.hpp"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "polyhal/app/json_input.hpp"
#include "polyhal/error.hpp"
#include "util/json_file.hpp"

namespace polyhal {
namespace {

constexpr std::uintmax_t kMaxModuleFileBytes = std::uintmax_t{1} << 20;

/// `config[key]` as a boolean; false when absent or null.
bool flag(const nlohmann::json& config, const char* key, const std::filesystem::path& file) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return false;
  if (!it->is_boolean())
    throw ConfigError(fmt::format("{}: key '{}': expected true or false, got {}", file.string(),
                                  key, json_excerpt(*it)));
  return it->get<bool>();
}

/// 1_Pooling/config.json's mode; "" when the directory has none.
std::string pooling_of(const std::filesystem::path& dir) {
  const auto file = dir / "1_Pooling" / "config.json";
  if (!std::filesystem::exists(file)) return "";
  const auto config = detail::read_json_object(file, kMaxModuleFileBytes, "pooling config");
  // sentence-transformers 6 writes one "pooling_mode" ("mean", "cls", "max",
  // "lasttoken", ...); earlier versions a flag per mode.
  if (const auto mode = config.find("pooling_mode"); mode != config.end() && !mode->is_null()) {
    const std::string name = mode->is_string() ? mode->get<std::string>() : std::string();
    if (name == "mean" || name == "cls" || name == "max") return name;
    throw ConfigError(fmt::format(
        "{}: key 'pooling_mode': {} is a pooling polyhal does not implement (it does mean, cls "
        "and max); set inference.pooling to one of those to override",
        file.string(), json_excerpt(*mode)));
  }
  std::vector<std::string> modes;
  if (flag(config, "pooling_mode_mean_tokens", file)) modes.push_back("mean");
  if (flag(config, "pooling_mode_cls_token", file)) modes.push_back("cls");
  if (flag(config, "pooling_mode_max_tokens", file)) modes.push_back("max");
  for (const char* unsupported : {"pooling_mode_mean_sqrt_len_tokens",
                                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken"}) {
    if (flag(config, unsupported, file))
      throw ConfigError(fmt::format(
          "{}: {} is a pooling polyhal does not implement (it does mean, cls and max); set "
          "inference.pooling to one of those to override",
          file.string(), unsupported));
  }
  if (modes.size() != 1)
    throw ConfigError(
        fmt::format("{}: {} pooling modes on at once; polyhal takes exactly one (mean, cls or max)",
                    file.string(), modes.size()));
  return modes.front();
}

/// A module's class name without its package: sentence-transformers 5
/// writes "sentence_transformers.models.Pooling", 6
/// "sentence_transformers.sentence_transformer.modules.pooling.Pooling".
std::string_view module_class(std::string_view name) {
  if (!name.starts_with("sentence_transformers.")) return name;
  const auto dot = name.rfind('.');
  return name.substr(dot + 1);
}

/// Whether modules.json lists Normalize. Every module must be one polyhal
/// applies: the Transformer (the encoder), Pooling, Normalize.
bool normalizes(const std::filesystem::path& dir) {
  const auto file = dir / "modules.json";
  if (!std::filesystem::exists(file)) return false;
  const auto modules = detail::read_json_value(file, kMaxModuleFileBytes, "module list");
  if (!modules.is_array())
    throw ConfigError(
        fmt::format("{}: expected a list of modules, got {}", file.string(), modules.type_name()));
  bool normalize = false;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const auto& module = modules[i];
    const auto type = module.is_object() ? module.find("type") : module.end();
    if (!module.is_object() || type == module.end() || !type->is_string())
      throw ConfigError(
          fmt::format("{}: module {}: expected an object with a string 'type', got {}",
                      file.string(), i, json_excerpt(module)));
    const auto& name = type->get_ref<const std::string&>();
    const std::string_view kind = module_class(name);
    if (kind == "Normalize") {
      normalize = true;
    } else if (kind != "Transformer" && kind != "Pooling") {
      const auto path = module.find("path");
      throw ConfigError(fmt::format(
          "{}: module {} is {}{}: polyhal applies Transformer, Pooling and Normalize only, and "
          "leaving a module out would give other embeddings than sentence-transformers'; set "
          "inference.pooling (and inference.normalize) to take the pooled encoder output "
          "without the directory's modules",
          file.string(), i, name,
          path != module.end() && path->is_string() ? " (" + path->get<std::string>() + ")" : ""));
    }
  }
  return normalize;
}

}  // namespace

SentencePooling resolve_sentence_pooling(const std::string& pooling, const std::string& normalize,
                                         const std::filesystem::path& model_dir) {
  SentencePooling out;
  out.mode = pooling;
  // The directory's pipeline is used when its pooling is: then every module
  // it lists is checked, whatever inference.normalize says.
  bool directory_pipeline = false;
  if (pooling == "auto") {
    const std::string found = model_dir.empty() ? "" : pooling_of(model_dir);
    out.mode = found.empty() ? "none" : found;
    directory_pipeline = !found.empty();
    if (directory_pipeline) out.source = (model_dir / "1_Pooling" / "config.json").string();
  }
  const bool wants_modules =
      directory_pipeline || (normalize == "auto" && out.mode != "none" && !model_dir.empty());
  const bool listed_normalize = wants_modules && normalizes(model_dir);
  out.normalize = normalize == "true" || (normalize == "auto" && listed_normalize);
  if (normalize == "auto" && out.normalize)
    out.source += (out.source.empty() ? "" : ", ") + (model_dir / "modules.json").string();
  return out;
}

std::optional<SentenceBertSettings> read_sentence_bert_settings(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return std::nullopt;
  const nlohmann::json json =
      detail::read_json_object(file, std::uintmax_t{1} << 20, "sentence-transformers settings");
  SentenceBertSettings out;
  if (json.contains("max_seq_length") && !json.at("max_seq_length").is_null()) {
    const auto& value = json.at("max_seq_length");
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 ||
        value.get<std::int64_t>() > (std::int64_t{1} << 20))
      throw ConfigError(fmt::format("{}: key 'max_seq_length': expected a positive integer, got {}",
                                    file.string(), json_excerpt(value)));
    out.max_seq_length = value.get<std::int64_t>();
  }
  if (json.contains("do_lower_case")) {
    const auto& value = json.at("do_lower_case");
    if (!value.is_boolean())
      throw ConfigError(fmt::format("{}: key 'do_lower_case': expected true or false, got {}",
                                    file.string(), json_excerpt(value)));
    out.do_lower_case = value.get<bool>();
  }
  return out;
}

}  // namespace polyhal
