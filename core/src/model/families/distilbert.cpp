// DistilBERT (Sanh et al. 2019): BERT's post-norm layers under its own names
// (transformer.layer.N with q_lin, sa_layer_norm, ffn.lin1...) and config
// keys (dim, n_layers, n_heads, hidden_dim), word and position embeddings
// without token types, no pooler; its classification head is
// pre_classifier with ReLU (BERT's pooler with ReLU for tanh).
#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>

#include "model/families/bert_family.hpp"

namespace polyhal::families {
namespace {

// DistilBERT's name within a layer, and BERT's.
constexpr std::array<LayerName, 8> kLayerNames{{
    {"attention.q_lin.", "attention.self.query."},
    {"attention.k_lin.", "attention.self.key."},
    {"attention.v_lin.", "attention.self.value."},
    {"attention.out_lin.", "attention.output.dense."},
    {"sa_layer_norm.", "attention.output.LayerNorm."},
    {"ffn.lin1.", "intermediate.dense."},
    {"ffn.lin2.", "output.dense."},
    {"output_layer_norm.", "output.LayerNorm."},
}};

constexpr CheckpointPrefix kHeadPrefixes[] = {
    {"pre_classifier.", "bert.pooler.dense."},
    {"vocab_transform.", "cls.predictions.transform.dense."},
    {"vocab_layer_norm.", "cls.predictions.transform.LayerNorm."},
    {"vocab_projector.bias", "cls.predictions.bias"},
    {"vocab_projector.weight", "cls.predictions.decoder.weight"},  // tied: left out
};

std::optional<std::string> renamed_layer(std::string_view layer_part, bool to_bert) {
  return renamed_layer_part(kLayerNames, layer_part, to_bert);
}

class DistilbertFamily final : public BertFamily {
 public:
  ModelType type() const override { return ModelType::distilbert; }
  const char* name() const override { return "distilbert"; }
  const char* title() const override { return "DistilBERT"; }
  std::span<const FamilyPreset> presets() const override { return {}; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    json.read("dim", c.hidden_size);
    json.read("n_layers", c.num_hidden_layers);
    json.read("n_heads", c.num_attention_heads);
    json.read("hidden_dim", c.intermediate_size);
    json.read("activation", c.hidden_act);
    json.read("dropout", c.hidden_dropout_prob);
    json.read("attention_dropout", c.attention_probs_dropout_prob);
    c.type_vocab_size = 1;
    c.layer_norm_eps = 1e-12;  // DistilBERT's LayerNorms, fixed in its code
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    for (const char* bert_key :
         {"hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
          "type_vocab_size", "layer_norm_eps", "hidden_act", "hidden_dropout_prob",
          "attention_probs_dropout_prob"})
      json.erase(bert_key);
    json["dim"] = c.hidden_size;
    json["n_layers"] = c.num_hidden_layers;
    json["n_heads"] = c.num_attention_heads;
    json["hidden_dim"] = c.intermediate_size;
    json["activation"] = c.hidden_act;
    json["dropout"] = c.hidden_dropout_prob;
    json["attention_dropout"] = c.attention_probs_dropout_prob;
    json["sinusoidal_pos_embds"] = false;  // the table is written whatever made it
  }

  std::optional<std::string> polyhal_name(const std::string& name) const override {
    std::string_view rest = name;
    const bool prefixed = rest.starts_with("distilbert.");
    if (prefixed) rest.remove_prefix(std::string_view("distilbert.").size());
    constexpr std::string_view kLayers = "transformer.layer.";
    if (rest.starts_with(kLayers))
      if (auto layer = renamed_layer(rest.substr(kLayers.size()), true))
        return "bert.encoder.layer." + *layer;
    if (prefixed) return "bert." + std::string(rest);
    return renamed_prefix(kHeadPrefixes, name);
  }
  std::string checkpoint_name(const std::string& name, const TaskHead& head) const override {
    constexpr std::string_view kLayers = "bert.encoder.layer.";
    if (name.starts_with(kLayers))
      if (auto layer = renamed_layer(std::string_view(name).substr(kLayers.size()), false))
        return "distilbert.transformer.layer." + *layer;
    if (name == "bert.embeddings.token_type_embeddings.weight") return {};  // folded in
    if (name.starts_with("bert.pooler.dense."))
      return head.kind == TaskHead::Kind::classification
                 ? "pre_classifier." + name.substr(std::string_view("bert.pooler.dense.").size())
                 : std::string{};
    if (name.starts_with("bert.")) return "distilbert." + name.substr(5);
    return name;
  }
  bool token_types() const override { return false; }
  // DistilBertForSequenceClassification: pre_classifier, ReLU, classifier.
  Activation pooler_activation() const override { return Activation::relu; }
  std::string architecture(const TaskHead& head) const override {
    return family_architecture("DistilBert", head);
  }
  std::string task_problem(TaskHead::Kind kind, bool) const override {
    if (kind == TaskHead::Kind::pretraining)
      return "pre-training a DistilBERT model (distillation from a teacher) is not built; "
             "fine-tune it (task: glue or squad) or run it (task: inference)";
    return {};
  }
};

}  // namespace

const ModelFamily& distilbert_family() {
  static const DistilbertFamily family;
  return family;
}

}  // namespace polyhal::families
