#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/json_input.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <fstream>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"
#include "util/regular_file.hpp"

namespace polyhal {
namespace {

struct Preset {
  const char* name;
  std::int64_t layers, hidden, heads;
};
// Google's BERT miniatures and the two original sizes; FFN is 4 x hidden.
// GroupBERT's as Graphcore's configs/groupbert/*.json define them.
constexpr Preset kPresets[] = {{"tiny", 2, 128, 2},
                               {"mini", 4, 256, 4},
                               {"small", 4, 512, 8},
                               {"medium", 8, 512, 8},
                               {"base", 12, 768, 12},
                               {"large", 24, 1024, 16},
                               {"groupbert-mini", 4, 256, 4},
                               {"groupbert-medium", 8, 512, 8},
                               {"groupbert-base", 12, 768, 12},
                               {"groupbert-large", 24, 1024, 16}};

}  // namespace

std::int64_t BertConfig::parameter_count() const {
  const std::int64_t h = hidden_size, i = intermediate_size;
  const std::int64_t embeddings =
      (vocab_size + max_position_embeddings + type_vocab_size) * h + 2 * h;
  std::int64_t layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
  if (groupbert()) {  // docs/groupbert.md, Parameters per layer
    const std::int64_t g = ffn_output_groups;
    const std::int64_t conv =
        2 * (h * h + h) + conv_kernel_size * conv_group_size * h + 2 * h + (h * h + h) + 2 * h;
    const std::int64_t ffn = (h * i + i) + (i * h / g + h) + (g > 1 ? h * h + h : 0) + 2 * h;
    layer = conv + 2 * ffn + 4 * (h * h + h) + 2 * h;
  }
  const std::int64_t final_norm = groupbert() ? 2 * h : 0;
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
  if (model_type != "bert" && model_type != "groupbert") {
    throw ConfigError(fmt::format(
        "{}: key 'model_type': expected \"bert\" or \"groupbert\", got \"{}\"", where, model_type));
  }
  if (!groupbert()) return;
  within(ffn_output_groups, "groupbert_ffn_output_groups", 1024);
  within(conv_group_size, "groupbert_conv_group_size", std::int64_t{1} << 16);
  within(conv_kernel_size, "groupbert_conv_kernel_size", 1024);
  if (intermediate_size % ffn_output_groups != 0 || hidden_size % ffn_output_groups != 0) {
    throw ConfigError(fmt::format(
        "{}: key 'groupbert_ffn_output_groups': {} groups do not divide intermediate_size {} and "
        "hidden_size {}",
        where, ffn_output_groups, intermediate_size, hidden_size));
  }
  if (hidden_size % conv_group_size != 0) {
    throw ConfigError(
        fmt::format("{}: key 'groupbert_conv_group_size': {} does not divide hidden_size {}", where,
                    conv_group_size, hidden_size));
  }
}

const std::vector<std::string>& bert_preset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : kPresets) n.emplace_back(p.name);
    return n;
  }();
  return names;
}

BertConfig bert_preset(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name == p.name) {
      BertConfig c;
      c.num_hidden_layers = p.layers;
      c.hidden_size = p.hidden;
      c.num_attention_heads = p.heads;
      c.intermediate_size = 4 * p.hidden;
      if (std::string_view(p.name).starts_with("groupbert-")) {
        c.model_type = "groupbert";
        c.layer_norm_eps = 1e-3;
      }
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
  BertConfig c;
  // Each value of the type its field has: an integer is never read from a
  // float (1e300 would not fit), a string never from a number.
  auto read = [&](const char* key, auto& field) {
    if (!json.contains(key)) return;
    const auto& value = json.at(key);
    using Field = std::decay_t<decltype(field)>;
    bool fits = false;
    if constexpr (std::is_integral_v<Field>) {
      fits = value.is_number_integer();
    } else if constexpr (std::is_floating_point_v<Field>) {
      fits = value.is_number();
    } else {
      fits = value.is_string();
    }
    if (!fits)
      throw ConfigError(fmt::format("{}: key '{}': unexpected value {}", file.string(), key,
                                    json_excerpt(value)));
    value.get_to(field);
  };
  read("vocab_size", c.vocab_size);
  read("hidden_size", c.hidden_size);
  read("num_hidden_layers", c.num_hidden_layers);
  read("num_attention_heads", c.num_attention_heads);
  read("intermediate_size", c.intermediate_size);
  read("max_position_embeddings", c.max_position_embeddings);
  read("type_vocab_size", c.type_vocab_size);
  read("layer_norm_eps", c.layer_norm_eps);
  read("hidden_act", c.hidden_act);
  read("hidden_dropout_prob", c.hidden_dropout_prob);
  read("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  read("initializer_range", c.initializer_range);
  read("model_type", c.model_type);
  // Graphcore's TensorFlow configs say "groupbert": true instead.
  if (json.contains("groupbert")) {
    const auto& flag = json.at("groupbert");
    if (!flag.is_boolean())
      throw ConfigError(fmt::format("{}: key 'groupbert': expected true or false, got {}",
                                    file.string(), json_excerpt(flag)));
    const bool model_type_given = json.contains("model_type");
    if (flag.get<bool>() && model_type_given && c.model_type != "groupbert")
      throw ConfigError(fmt::format(
          "{}: key 'groupbert': true, but key 'model_type' says \"{}\"; remove one of them",
          file.string(), c.model_type));
    if (flag.get<bool>()) c.model_type = "groupbert";
  }
  const char* groupbert_keys[] = {"groupbert_ffn_output_groups", "groupbert_conv_group_size",
                                  "groupbert_conv_kernel_size"};
  if (c.groupbert()) {
    if (!json.contains("layer_norm_eps")) c.layer_norm_eps = 1e-3;  // Graphcore's
    read(groupbert_keys[0], c.ffn_output_groups);
    read(groupbert_keys[1], c.conv_group_size);
    read(groupbert_keys[2], c.conv_kernel_size);
  } else {
    for (const char* key : groupbert_keys) {
      if (json.contains(key))
        throw ConfigError(
            fmt::format("{}: key '{}': a GroupBERT setting in a \"{}\" model (set \"model_type\": "
                        "\"groupbert\")",
                        file.string(), key, c.model_type));
    }
  }
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
  nlohmann::json json{{"architectures", {hf_architecture(head)}},
                      {"model_type", "bert"},
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
                      {"pad_token_id", 0}};
  if (c.groupbert()) {
    json["model_type"] = "groupbert";
    json["groupbert_ffn_output_groups"] = c.ffn_output_groups;
    json["groupbert_conv_group_size"] = c.conv_group_size;
    json["groupbert_conv_kernel_size"] = c.conv_kernel_size;
  }
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
