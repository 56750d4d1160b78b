#include "polyhal/app/tokenizer_files.hpp"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "polyhal/error.hpp"
#include "text/sentencepiece_model.hpp"
#include "text/tokenizer_json.hpp"
#include "util/json_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

// A multilingual tokenizer.json (250k tokens) is about 17 MB.
constexpr std::uintmax_t kMaxTokenizerJsonBytes = std::uintmax_t{64} << 20;
constexpr std::uintmax_t kMaxTokenizerConfigBytes = std::uintmax_t{1} << 20;
// Longer words than this are not words; the bound keeps a hostile value from
// meaning "no limit".
constexpr std::int64_t kMaxCharsPerWordSetting = 1 << 20;

[[noreturn]] void unsupported(const std::filesystem::path& file, const std::string& key,
                              const std::string& why) {
  throw ConfigError(fmt::format(
      "{}: \"{}\": {}; polyhal's tokenizer is BERT's WordPiece (docs/bert.md, \"Text mode\")",
      file.string(), key, why));
}

/// `json[key]` when it is a string, else empty.
std::optional<std::string> string_at(const nlohmann::json& json, const char* key) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

std::optional<bool> bool_at(const nlohmann::json& json, const char* key) {
  const auto it = json.find(key);
  if (it == json.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

/// Accents are stripped exactly when text is lower-cased here, as in both
/// of Hugging Face's tokenizers when strip_accents is null.
void check_strip_accents(const std::filesystem::path& file, const nlohmann::json& json,
                         bool lower) {
  const auto strip = bool_at(json, "strip_accents");
  if (strip && *strip != lower)
    unsupported(file, "strip_accents",
                fmt::format("{} with do_lower_case {}: accents are stripped exactly when text is "
                            "lower-cased here",
                            *strip, lower));
}

/// tokenizer_config.json: BertTokenizer's arguments.
void read_tokenizer_config(const std::filesystem::path& file, TokenizerFiles& out) {
  const auto settings =
      detail::read_json_object(file, kMaxTokenizerConfigBytes, "tokenizer config");
  if (const auto name = string_at(settings, "tokenizer_class");
      name && *name != "BertTokenizer" && *name != "BertTokenizerFast")
    unsupported(file, "tokenizer_class", *name + " is not BERT's WordPiece tokenizer");
  out.lower_case = bool_at(settings, "do_lower_case");
  check_strip_accents(file, settings, out.lower_case.value_or(true));
  if (bool_at(settings, "tokenize_chinese_chars") == false)
    unsupported(file, "tokenize_chinese_chars",
                "false: CJK characters are always split apart here");
  if (bool_at(settings, "do_basic_tokenize") == false)
    unsupported(file, "do_basic_tokenize", "false: basic tokenization always runs here");
  if (const auto it = settings.find("never_split");
      it != settings.end() && !it->is_null() && !(it->is_array() && it->empty()))
    unsupported(file, "never_split", "words kept whole are not implemented");
  out.max_chars_per_word = kHuggingFaceMaxCharsPerWord;
}

/// tokenizer.json: the fast tokenizer's model, normalizer and pre-tokenizer.
void read_tokenizer_json(const std::filesystem::path& file, TokenizerFiles& out) {
  const auto pipeline = read_tokenizer_json_file(file);
  if (const auto it = pipeline.find("model"); it != pipeline.end() && it->is_object()) {
    const auto& model = *it;
    if (const auto type = string_at(model, "type"); type && *type != "WordPiece")
      unsupported(file, "model.type", *type + " is not WordPiece");
    if (const auto prefix = string_at(model, "continuing_subword_prefix");
        prefix && *prefix != "##")
      unsupported(file, "model.continuing_subword_prefix",
                  fmt::format("\"{}\": word pieces continue with \"##\" here", *prefix));
    if (const auto unk = string_at(model, "unk_token"); unk && *unk != "[UNK]")
      unsupported(file, "model.unk_token",
                  fmt::format("\"{}\": the unknown token is [UNK] here", *unk));
    if (const auto max = model.find("max_input_chars_per_word"); max != model.end()) {
      if (!max->is_number_integer() || max->get<std::int64_t>() < 1 ||
          max->get<std::int64_t>() > kMaxCharsPerWordSetting)
        throw ConfigError(
            fmt::format("{}: \"model.max_input_chars_per_word\": {} is not a whole number from 1 "
                        "to {}",
                        file.string(), max->dump(), kMaxCharsPerWordSetting));
      out.max_chars_per_word = static_cast<std::size_t>(max->get<std::int64_t>());
    } else {
      out.max_chars_per_word = kHuggingFaceMaxCharsPerWord;
    }
  }
  if (const auto it = pipeline.find("normalizer"); it != pipeline.end() && it->is_object()) {
    const auto& normalizer = *it;
    if (const auto type = string_at(normalizer, "type"); type && *type != "BertNormalizer")
      unsupported(file, "normalizer.type", *type + " is not BertNormalizer");
    if (bool_at(normalizer, "clean_text") == false)
      unsupported(file, "normalizer.clean_text", "false: text is always cleaned here");
    if (bool_at(normalizer, "handle_chinese_chars") == false)
      unsupported(file, "normalizer.handle_chinese_chars",
                  "false: CJK characters are always split apart here");
    const auto lower = bool_at(normalizer, "lowercase");
    if (!out.lower_case) out.lower_case = lower;
    check_strip_accents(file, normalizer, lower.value_or(true));
  }
  if (const auto it = pipeline.find("pre_tokenizer"); it != pipeline.end() && it->is_object()) {
    if (const auto type = string_at(*it, "type"); type && *type != "BertPreTokenizer")
      unsupported(file, "pre_tokenizer.type", *type + " is not BertPreTokenizer");
  }
}

}  // namespace

nlohmann::json read_tokenizer_json_file(const std::filesystem::path& file) {
  return detail::read_json_object(file, kMaxTokenizerJsonBytes, "tokenizer file");
}

nlohmann::json pipeline_of_sentencepiece(const std::filesystem::path& model_file) {
  const auto dir = model_file.parent_path();
  if (const auto file = dir / "tokenizer_config.json"; std::filesystem::exists(file)) {
    const auto settings =
        detail::read_json_object(file, kMaxTokenizerConfigBytes, "tokenizer config");
    const std::string name = settings.value("tokenizer_class", "XLMRobertaTokenizer");
    if (name != "XLMRobertaTokenizer" && name != "XLMRobertaTokenizerFast")
      unsupported(file, "tokenizer_class",
                  name +
                      " over a SentencePiece model: only XLM-R's layout is converted here; "
                      "save the tokenizer with transformers (save_pretrained writes a "
                      "tokenizer.json) and point data.vocab at it");
  }
  detail::refuse_special_or_oversized_file(model_file, kMaxTokenizerJsonBytes,
                                           "SentencePiece model");
  std::ifstream in(model_file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof())
    throw ConfigError(fmt::format("{}: cannot read the SentencePiece model", model_file.string()));
  return text::xlm_roberta_pipeline(text::parse_sentencepiece_model(bytes, model_file.string()),
                                    model_file.string());
}

nlohmann::json pipeline_of_bpe_files(const std::filesystem::path& vocab_json) {
  const auto dir = vocab_json.parent_path();
  nlohmann::json vocab = detail::read_json_object(vocab_json, kMaxTokenizerJsonBytes, "vocabulary");
  const auto merges_file = dir / "merges.txt";
  detail::refuse_special_or_oversized_file(merges_file, kMaxTokenizerJsonBytes, "merges file");
  std::ifstream in(merges_file);
  if (!in)
    throw ConfigError(fmt::format("{}: cannot read the merges beside {}", merges_file.string(),
                                  vocab_json.filename().string()));
  nlohmann::json merges = nlohmann::json::array();
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#version")) continue;
    merges.push_back(line);
  }
  nlohmann::json settings = nlohmann::json::object();
  if (const auto file = dir / "tokenizer_config.json"; std::filesystem::exists(file))
    settings = detail::read_json_object(file, kMaxTokenizerConfigBytes, "tokenizer config");
  const bool prefix_space = settings.value("add_prefix_space", false);
  const bool gpt2 = settings.value("tokenizer_class", "") == "GPT2Tokenizer";
  nlohmann::json pipeline{
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"unk_token", nullptr}}},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", prefix_space}, {"trim_offsets", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", nlohmann::json::array()}};
  for (const char* name : {"<s>", "<pad>", "</s>", "<unk>", "<mask>"}) {
    const auto id = vocab.find(name);
    if (id == vocab.end() || !id->is_number_integer()) continue;
    const bool mask = std::string(name) == "<mask>";
    pipeline["added_tokens"].push_back({{"id", *id},
                                        {"content", name},
                                        {"lstrip", mask},
                                        {"normalized", !mask},
                                        {"special", true}});
  }
  if (!gpt2 && vocab.contains("<s>") && vocab.contains("</s>"))
    pipeline["post_processor"] = {{"type", "RobertaProcessing"},
                                  {"cls", nlohmann::json::array({"<s>", vocab.at("<s>")})},
                                  {"sep", nlohmann::json::array({"</s>", vocab.at("</s>")})},
                                  {"trim_offsets", true},
                                  {"add_prefix_space", prefix_space}};
  else
    pipeline["post_processor"] = {{"type", "ByteLevel"}, {"trim_offsets", false}};
  return pipeline;
}

TokenizerFiles read_tokenizer_files(const std::filesystem::path& vocab_file) {
  TokenizerFiles out;
  const auto dir = vocab_file.parent_path();
  // A SentencePiece model decides its own casing (XLM-R's does not lower-case).
  if (vocab_file.extension() == ".model") {
    out.casing_fixed = true;
    out.lower_case = false;
    return out;
  }
  // A tokenizer.json is read whole by its pipeline (pipeline_tokenizer.cpp):
  // it says every setting itself. Only BertTokenizerFast's rule is taken
  // from beside it: tokenizer_config.json's do_lower_case rebuilds a
  // BertNormalizer's lowercase.
  if (vocab_file.extension() == ".json") {
    const auto pipeline = read_tokenizer_json_file(vocab_file);
    const auto normalizer = pipeline.find("normalizer");
    out.casing_fixed = true;
    if (normalizer == pipeline.end() || !normalizer->is_object()) {
      out.lower_case = false;
      return out;
    }
    if (normalizer->value("type", "") != "BertNormalizer") {
      // Whether it lower-cases, for the model card: a Lowercase anywhere in it.
      out.lower_case = normalizer->dump().find(R"("type":"Lowercase")") != std::string::npos;
      return out;
    }
    out.casing_fixed = false;
    const auto lower = normalizer->find("lowercase");
    out.lower_case = lower == normalizer->end() || !lower->is_boolean() || lower->get<bool>();
    if (const auto file = dir / "tokenizer_config.json"; std::filesystem::exists(file)) {
      const auto settings =
          detail::read_json_object(file, kMaxTokenizerConfigBytes, "tokenizer config");
      if (const auto it = settings.find("do_lower_case"); it != settings.end() && it->is_boolean())
        out.lower_case = it->get<bool>();
    }
    out.max_chars_per_word = kHuggingFaceMaxCharsPerWord;
    return out;
  }
  // tokenizer_config.json first: its do_lower_case wins, as BertTokenizerFast
  // rebuilds tokenizer.json's normalizer from it.
  if (const auto file = dir / "tokenizer_config.json"; std::filesystem::exists(file))
    read_tokenizer_config(file, out);
  if (const auto file = dir / "tokenizer.json"; std::filesystem::exists(file))
    read_tokenizer_json(file, out);
  return out;
}

}  // namespace polyhal
