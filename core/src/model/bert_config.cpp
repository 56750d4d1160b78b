#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/json_input.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/families/model_family.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {

std::int64_t BertConfig::parameter_count() const {
  const std::int64_t h = hidden_size;
  const std::int64_t embeddings =
      (vocab_size + max_position_embeddings + type_vocab_size) * embedding_width() +
      2 * embedding_width() + (embedding_width() != h ? embedding_width() * h + h : 0);
  const auto& family = families::model_family(model_type);
  const std::int64_t layer = family.layer_parameters(*this);
  const std::int64_t final_norm = family.final_parameters(*this);
  const std::int64_t heads = (h * h + h) + (h * h + h + 2 * h) + vocab_size + (2 * h + 2);
  return embeddings + num_hidden_layers * layer + final_norm + heads;
}

void BertConfig::validate(const std::string& where) const {
  // Bounds far above any BERT (vocabularies of 250k, hidden 4096, 48
  // layers) and far below where sizes computed from them overflow: every
  // tensor has fewer than 2^46 elements, so byte counts fit in int64.
  auto within = [&](std::int64_t v, const char* key, std::int64_t most) {
    if (v <= 0 || v > most)
      throw ConfigError(fmt::format("{}: key '{}': expected a positive integer up to {}, got {}",
                                    where, key, most, v));
  };
  within(vocab_size, "vocab_size", std::int64_t{1} << 24);
  within(hidden_size, "hidden_size", std::int64_t{1} << 16);
  within(num_hidden_layers, "num_hidden_layers", 1024);
  within(num_attention_heads, "num_attention_heads", 1024);
  within(intermediate_size, "intermediate_size", std::int64_t{1} << 18);
  within(max_position_embeddings, "max_position_embeddings", std::int64_t{1} << 20);
  within(type_vocab_size, "type_vocab_size", std::int64_t{1} << 16);
  if (hidden_size % num_attention_heads != 0) {
    throw ConfigError(fmt::format("{}: hidden_size {} is not a multiple of num_attention_heads {}",
                                  where, hidden_size, num_attention_heads));
  }
  if (hidden_act != "gelu") {
    throw ConfigError(
        fmt::format("{}: key 'hidden_act': only \"gelu\" (exact erf) is supported, got \"{}\"",
                    where, hidden_act));
  }
  if (!(layer_norm_eps > 0.0)) {
    throw ConfigError(fmt::format("{}: key 'layer_norm_eps': expected a positive number", where));
  }
  for (const auto& [key, share] :
       {std::pair{"hidden_dropout_prob", hidden_dropout_prob},
        std::pair{"attention_probs_dropout_prob", attention_probs_dropout_prob}})
    if (!(share >= 0.0 && share < 1.0))
      throw ConfigError(
          fmt::format("{}: key '{}': expected a probability in [0, 1), got {}", where, key, share));
  if (!(initializer_range > 0.0 && initializer_range < 1e3))
    throw ConfigError(fmt::format("{}: key 'initializer_range': expected a positive number, got {}",
                                  where, initializer_range));
  families::model_family(model_type).validate(*this, where);
}

const std::vector<std::string>& bert_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto* family : families::model_families())
      for (const auto& preset : family->presets()) n.emplace_back(preset.name);
    return n;
  }();
  return names;
}

BertConfig bert_preset(const std::string& name) {
  for (const auto* family : families::model_families()) {
    for (const auto& preset : family->presets()) {
      if (name != preset.name) continue;
      BertConfig c;
      c.model_type = family->type();
      c.num_hidden_layers = preset.layers;
      c.hidden_size = preset.hidden;
      c.num_attention_heads = preset.heads;
      c.intermediate_size = 4 * preset.hidden;
      family->preset_defaults(c);
      return c;
    }
  }
  throw ConfigError(fmt::format("unknown BERT preset \"{}\"; presets: {}", name,
                                fmt::join(bert_preset_names(), ", ")));
}

namespace {

/// A config.json as one JSON object, its size capped before it is read.
nlohmann::json read_config_object(const std::filesystem::path& file) {
  std::error_code size_error;
  if (const auto bytes = std::filesystem::file_size(file, size_error);
      !size_error && bytes > (std::uintmax_t{1} << 20)) {
    throw ConfigError(
        fmt::format("{}: {} bytes: a model config.json is a few hundred", file.string(), bytes));
  }
  detail::refuse_special_file(file);
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the model config", file.string()));
  nlohmann::json json;
  try {
    json = parse_json_input(in, file.string());
  } catch (const nlohmann::json::exception& e) {  // syntax, or a number like 1e999
    throw ConfigError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  if (!json.is_object())
    throw ConfigError(fmt::format("{}: expected a JSON object of model settings", file.string()));
  return json;
}

}  // namespace

BertConfig read_hf_config(const std::filesystem::path& file) {
  const nlohmann::json json = read_config_object(file);
  const families::ConfigJson keys(json, file.string());
  BertConfig c;
  keys.read("vocab_size", c.vocab_size);
  keys.read("hidden_size", c.hidden_size);
  keys.read("num_hidden_layers", c.num_hidden_layers);
  keys.read("num_attention_heads", c.num_attention_heads);
  keys.read("intermediate_size", c.intermediate_size);
  keys.read("max_position_embeddings", c.max_position_embeddings);
  keys.read("type_vocab_size", c.type_vocab_size);
  keys.read("layer_norm_eps", c.layer_norm_eps);
  if (keys.has("pad_token_id") && !keys.at("pad_token_id").is_null())  // null: none
    keys.read("pad_token_id", c.pad_token_id);
  keys.read("hidden_act", c.hidden_act);
  keys.read("hidden_dropout_prob", c.hidden_dropout_prob);
  keys.read("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  keys.read("initializer_range", c.initializer_range);
  const auto& family = families::family_of_config(keys);
  c.model_type = family.type();
  family.read_config(keys, c);
  c.validate(file.string());
  return c;
}

std::string hf_architecture(const TaskHead& head) {
  switch (head.kind) {
    case TaskHead::Kind::question_answering:
      return "BertForQuestionAnswering";
    case TaskHead::Kind::classification:
      return "BertForSequenceClassification";
    case TaskHead::Kind::pretraining:
      break;
  }
  return "BertForPreTraining";
}

std::optional<TaskHead> read_hf_head(const std::filesystem::path& file) {
  const nlohmann::json json = read_config_object(file);
  const auto architectures = json.find("architectures");
  if (architectures == json.end() || architectures->is_null()) return std::nullopt;
  if (!architectures->is_array() || architectures->empty() || !architectures->front().is_string())
    throw ConfigError(
        fmt::format("{}: key 'architectures': expected a list of model class names, "
                    "got {}",
                    file.string(), json_excerpt(*architectures)));
  const auto name = architectures->front().get<std::string>();
  TaskHead head;
  if (name.ends_with("ForQuestionAnswering")) {
    head.kind = TaskHead::Kind::question_answering;
    return head;
  }
  if (!name.ends_with("ForSequenceClassification")) return std::nullopt;
  head.kind = TaskHead::Kind::classification;
  // id2label {"0": "negative", "1": "positive"}: its size is num_labels (as
  // transformers' PretrainedConfig reads it), the names are the labels.
  const auto id2label = json.find("id2label");
  if (id2label == json.end() || id2label->is_null()) {
    head.num_labels = 2;  // transformers' default
  } else {
    constexpr std::size_t kMostLabels = 1 << 16;
    if (!id2label->is_object() || id2label->empty() || id2label->size() > kMostLabels)
      throw ConfigError(
          fmt::format("{}: key 'id2label': expected an object of 1 to {} labels "
                      "({{\"0\": \"negative\", ...}}), got {}",
                      file.string(), kMostLabels, json_excerpt(*id2label)));
    head.num_labels = static_cast<std::int64_t>(id2label->size());
    head.labels.resize(id2label->size());
    std::vector<bool> seen(id2label->size());
    for (const auto& [key, value] : id2label->items()) {
      std::size_t index = 0;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (error != std::errc{} || end != key.data() + key.size() || index >= seen.size() ||
          seen[index] || !value.is_string() || value.get<std::string>().size() > 256)
        throw ConfigError(fmt::format(
            "{}: key 'id2label.{}': expected label ids 0 to {} each once, each naming a label of "
            "at most 256 bytes, got {}",
            file.string(), key.substr(0, 40), seen.size() - 1, json_excerpt(value)));
      seen[index] = true;
      head.labels[index] = value.get<std::string>();
    }
  }
  if (const auto type = json.find("problem_type");
      type != json.end() && type->is_string() && *type == "multi_label_classification")
    head.multi_label = true;
  return head;
}

void write_hf_config(const BertConfig& c, const std::filesystem::path& file, const TaskHead& head) {
  const auto& family = families::model_family(c.model_type);
  nlohmann::json json{{"architectures", {family.architecture(head)}},
                      {"model_type", family.name()},
                      {"vocab_size", c.vocab_size},
                      {"hidden_size", c.hidden_size},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"num_attention_heads", c.num_attention_heads},
                      {"intermediate_size", c.intermediate_size},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"type_vocab_size", c.type_vocab_size},
                      {"layer_norm_eps", c.layer_norm_eps},
                      {"hidden_act", c.hidden_act},
                      {"hidden_dropout_prob", c.hidden_dropout_prob},
                      {"attention_probs_dropout_prob", c.attention_probs_dropout_prob},
                      {"initializer_range", c.initializer_range},
                      {"pad_token_id", c.pad_token_id}};
  family.write_config(c, json);
  if (head.kind == TaskHead::Kind::classification) {
    nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
    for (std::int64_t i = 0; i < head.num_labels; ++i) {
      const auto index = static_cast<std::size_t>(i);
      const std::string label =
          index < head.labels.size() ? head.labels[index] : fmt::format("LABEL_{}", i);
      id2label[std::to_string(i)] = label;
      label2id[label] = i;
    }
    json["id2label"] = id2label;
    json["label2id"] = label2id;
    json["problem_type"] = head.num_labels == 1 ? "regression" : "single_label_classification";
  }
  detail::write_file_atomically(file, json.dump(2) + "\n");
}

}  // namespace polyhal
