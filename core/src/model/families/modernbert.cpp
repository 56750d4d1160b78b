// ModernBERT (Warner et al. 2024), as transformers' ModernBertModel names
// it: pre-norm layers (attn_norm, none on layer 0; mlp_norm), a fused Wqkv
// with rotary positions (global_rope_theta on the global layers,
// local_rope_theta on the others), attention that is global every
// global_attn_every_n_layers layers from layer 0 and a sliding window of
// local_attention tokens (half on each side) elsewhere, a GeGLU MLP (Wi to
// 2 x intermediate_size, GELU of the first half times the second, Wo), a
// final norm, no position table and no token types, and by default no biases
// in its linears and norms. ModernBertForSequenceClassification's head is
// ModernBertPredictionHead (dense, GELU, LayerNorm: polyhal's pooler with
// its norm) on the first token or on the mean of the tokens
// (classifier_pooling), then the classifier.
#include <fmt/format.h>

#include <string_view>

#include "model/families/bert_family.hpp"
#include "polyhal/error.hpp"

namespace polyhal::families {
namespace {

constexpr const char* kModernBertKeys[] = {"global_rope_theta", "local_rope_theta",
                                           "global_attn_every_n_layers", "local_attention"};

// ModernBertModel's names (after "model." in the task models) and polyhal's.
constexpr CheckpointPrefix kEncoderPrefixes[] = {
    {"embeddings.tok_embeddings.", "bert.embeddings.word_embeddings."},
    {"embeddings.norm.", "bert.embeddings.LayerNorm."},
    {"layers.", "bert.encoder.layer."},
    {"final_norm.", "bert.encoder.final_norm."},
};
constexpr CheckpointPrefix kHeadPrefixes[] = {
    {"head.dense.", "bert.pooler.dense."},
    {"head.norm.", "bert.pooler.norm."},
};
constexpr std::string_view kTaskPrefix = "model.";

// The config's bias switches, read and written alike.
using ModernBert = BertConfig::ModernBert;
constexpr std::pair<const char*, bool ModernBert::*> kBiasKeys[] = {
    {"attention_bias", &ModernBert::attention_bias},
    {"mlp_bias", &ModernBert::mlp_bias},
    {"norm_bias", &ModernBert::norm_bias},
    {"classifier_bias", &ModernBert::classifier_bias},
    {"decoder_bias", &ModernBert::decoder_bias}};

std::optional<std::string> checkpoint_prefix_of(std::span<const CheckpointPrefix> prefixes,
                                                const std::string& name, const char* prepend) {
  for (const auto& [checkpoint, polyhal] : prefixes)
    if (name.starts_with(polyhal))
      return prepend + std::string(checkpoint) + name.substr(std::string_view(polyhal).size());
  return std::nullopt;
}

/// The rotary base of the config's `layer_type` ("full_attention" or
/// "sliding_attention") from transformers 5's rope_parameters, when given.
void read_rope_parameters(const ConfigJson& json, BertConfig::ModernBert& m) {
  if (!json.has("rope_parameters") || json.at("rope_parameters").is_null()) return;
  const auto& rope = json.at("rope_parameters");
  if (!rope.is_object())
    json.fail("rope_parameters", "expected an object of rotary settings per layer type");
  for (const auto& [type, theta] : {std::pair{"full_attention", &m.global_rope_theta},
                                    std::pair{"sliding_attention", &m.local_rope_theta}}) {
    if (!rope.contains(type)) continue;
    const auto& settings = rope.at(type);
    if (!settings.is_object() || !settings.contains("rope_theta") ||
        !settings.at("rope_theta").is_number())
      json.fail("rope_parameters",
                fmt::format("'{}': expected {{\"rope_theta\": a number}}", type));
    if (settings.contains("rope_type") && settings.at("rope_type") != "default")
      json.fail("rope_parameters",
                fmt::format("'{}': rope_type {}: polyhal builds the default rotary positions", type,
                            settings.at("rope_type").dump()));
    *theta = settings.at("rope_theta").get<double>();
  }
}

/// transformers 5's layer_types must say what global_attn_every_n_layers
/// does (its attention windows follow the latter, its rotary bases the former).
void check_layer_types(const ConfigJson& json, const BertConfig& c) {
  if (!json.has("layer_types") || json.at("layer_types").is_null()) return;
  const auto& types = json.at("layer_types");
  if (!types.is_array() || std::ssize(types) != c.num_hidden_layers)
    json.fail("layer_types", fmt::format("expected a list of {} layer types (num_hidden_layers)",
                                         c.num_hidden_layers));
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const char* expected = c.modernbert.global_layer(l) ? "full_attention" : "sliding_attention";
    if (types.at(static_cast<std::size_t>(l)) != expected)
      json.fail("layer_types",
                fmt::format("layer {} is {}, but global_attn_every_n_layers {} makes it \"{}\"", l,
                            types.at(static_cast<std::size_t>(l)).dump(),
                            c.modernbert.global_attn_every_n_layers, expected));
  }
}

class ModernBertFamily final : public ModelFamily {
 public:
  ModelType type() const override { return ModelType::modernbert; }
  const char* name() const override { return "modernbert"; }
  const char* title() const override { return "ModernBERT"; }
  std::span<const FamilyPreset> presets() const override { return {}; }
  std::span<const char* const> own_keys() const override { return kModernBertKeys; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    auto& m = c.modernbert;
    // ModernBertConfig's defaults where the file says nothing.
    if (!json.has("max_position_embeddings")) c.max_position_embeddings = 8192;
    if (!json.has("pad_token_id")) c.pad_token_id = 50283;
    c.layer_norm_eps = 1e-5;
    json.read("norm_eps", c.layer_norm_eps);
    c.type_vocab_size = 1;
    c.hidden_dropout_prob = 0.0;
    c.attention_probs_dropout_prob = 0.0;
    json.read("mlp_dropout", c.hidden_dropout_prob);
    json.read("attention_dropout", c.attention_probs_dropout_prob);
    std::string activation = "gelu";
    json.read("hidden_activation", activation);
    if (activation != "gelu")
      json.fail(
          "hidden_activation",
          fmt::format("only \"gelu\" (exact erf, ModernBERT's) is built, got \"{}\"", activation));
    activation = "gelu";
    json.read("classifier_activation", activation);
    if (activation != "gelu")
      json.fail(
          "classifier_activation",
          fmt::format("only \"gelu\" (exact erf, ModernBERT's) is built, got \"{}\"", activation));
    json.read("global_rope_theta", m.global_rope_theta);
    json.read("local_rope_theta", m.local_rope_theta);
    read_rope_parameters(json, m);
    json.read("local_attention", m.local_attention);
    json.read("global_attn_every_n_layers", m.global_attn_every_n_layers);
    for (const auto& [key, field] : kBiasKeys) json.read(key, m.*field);
    json.read("classifier_pooling", m.classifier_pooling);
    if (m.classifier_pooling != "cls" && m.classifier_pooling != "mean")
      json.fail("classifier_pooling",
                fmt::format("expected \"cls\" or \"mean\", got \"{}\"", m.classifier_pooling));
    if (m.global_attn_every_n_layers < 1 || m.global_attn_every_n_layers > 1024)
      json.fail("global_attn_every_n_layers",
                fmt::format("expected 1 to 1024, got {}", m.global_attn_every_n_layers));
    if (m.local_attention < 2 || m.local_attention > (std::int64_t{1} << 20))
      json.fail("local_attention", fmt::format("expected a window of 2 to {} tokens, got {}",
                                               std::int64_t{1} << 20, m.local_attention));
    for (const auto& [key, theta] : {std::pair{"global_rope_theta", m.global_rope_theta},
                                     std::pair{"local_rope_theta", m.local_rope_theta}})
      if (!(theta > 1.0) || theta > 1e12)
        json.fail(key, fmt::format("expected a rotary base above 1, got {}", theta));
    check_layer_types(json, c);
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    const auto& m = c.modernbert;
    for (const char* bert_only : {"type_vocab_size", "layer_norm_eps", "hidden_act",
                                  "hidden_dropout_prob", "attention_probs_dropout_prob"})
      json.erase(bert_only);
    json["norm_eps"] = c.layer_norm_eps;
    json["hidden_activation"] = "gelu";
    json["classifier_activation"] = "gelu";
    json["mlp_dropout"] = c.hidden_dropout_prob;
    json["attention_dropout"] = c.attention_probs_dropout_prob;
    json["global_rope_theta"] = m.global_rope_theta;
    json["local_rope_theta"] = m.local_rope_theta;
    json["local_attention"] = m.local_attention;
    json["global_attn_every_n_layers"] = m.global_attn_every_n_layers;
    for (const auto& [key, field] : kBiasKeys) json[key] = m.*field;
    json["classifier_pooling"] = m.classifier_pooling;
  }
  void validate(const BertConfig& c, const std::string& where) const override {
    if (c.modernbert.local_attention > c.max_position_embeddings)
      throw ConfigError(
          fmt::format("{}: key 'local_attention': a window of {} tokens is longer than "
                      "max_position_embeddings {}",
                      where, c.modernbert.local_attention, c.max_position_embeddings));
    if (c.head_size() % 2 != 0)
      throw ConfigError(
          fmt::format("{}: rotary positions need an even head size, got hidden_size {} / {} heads",
                      where, c.hidden_size, c.num_attention_heads));
  }
  std::string sequence_problem(const BertConfig&, std::int64_t, const std::string&) const override {
    return {};
  }

  std::int64_t layer_parameters(const BertConfig& c) const override {
    const auto& m = c.modernbert;
    const std::int64_t h = c.hidden_size, i = c.intermediate_size;
    const std::int64_t norm = m.norm_bias ? 2 * h : h;
    return 4 * h * h + (m.attention_bias ? 4 * h : 0) + 3 * i * h + (m.mlp_bias ? 2 * i + h : 0) +
           2 * norm;
  }
  // The final norm, less layer 0's attention norm (it has none).
  std::int64_t final_parameters(const BertConfig&) const override { return 0; }
  void layer_tensor_shapes(const BertConfig& c, const std::string& p,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override {
    const std::int64_t h = c.hidden_size, i = c.intermediate_size;
    LayerTensorList list(shapes, p, h);
    if (p != encoder_layer_prefix(0)) list.norm("attn_norm");  // layer 0 reads the embeddings'
    list.dense("attn.Wqkv", 3 * h, h);
    list.dense("attn.Wo", h, h);
    list.norm("mlp_norm");
    list.dense("mlp.Wi", 2 * i, h);
    list.dense("mlp.Wo", h, i);
  }
  void final_tensor_shapes(const BertConfig& c,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override {
    shapes.push_back({"bert.encoder.final_norm.weight", {c.hidden_size}});
    shapes.push_back({"bert.encoder.final_norm.bias", {c.hidden_size}});
  }

  std::optional<std::string> polyhal_name(const std::string& name) const override {
    std::string rest = name;
    if (rest.starts_with(kTaskPrefix)) rest.erase(0, kTaskPrefix.size());
    if (auto renamed = renamed_prefix(kEncoderPrefixes, rest)) return renamed;
    return renamed_prefix(kHeadPrefixes, name);
  }
  // ModernBertForMaskedLM's decoder (tied to the embeddings, and its bias):
  // a start for fine-tuning, as transformers loads it.
  bool ignored_tensor(const std::string& name) const override {
    return name == "decoder.weight" || name == "decoder.bias";
  }
  std::string checkpoint_name(const std::string& name, const TaskHead&) const override {
    if (auto head = checkpoint_prefix_of(kHeadPrefixes, name, "")) return *head;
    if (auto encoder = checkpoint_prefix_of(kEncoderPrefixes, name, "model.")) return *encoder;
    if (name.starts_with("bert.")) return {};  // the zero position and type tables
    return name;
  }
  bool zero_tensor(const BertConfig& c, const std::string& name) const override {
    const auto& m = c.modernbert;
    if (name == "bert.embeddings.position_embeddings.weight" ||
        name == "bert.embeddings.token_type_embeddings.weight")
      return true;
    if (!name.ends_with(".bias")) return false;
    if (is_norm_name(name)) return !m.norm_bias;
    if (name.find(".attn.") != std::string::npos) return !m.attention_bias;
    if (name.find(".mlp.") != std::string::npos) return !m.mlp_bias;
    if (name.starts_with("bert.pooler.dense.")) return !m.classifier_bias;
    return false;  // the classifier's own bias is always there
  }
  bool token_types() const override { return false; }
  Activation pooler_activation() const override { return Activation::gelu; }
  bool pooler_norm() const override { return true; }
  bool qa_prediction_head() const override { return true; }
  bool mean_pooled_classifier(const BertConfig& c) const override {
    return c.modernbert.classifier_pooling == "mean";
  }
  std::string architecture(const TaskHead& head) const override {
    if (head.kind == TaskHead::Kind::pretraining) return "ModernBertForMaskedLM";
    return family_architecture("ModernBert", head);
  }
  std::string task_problem(TaskHead::Kind kind, bool) const override {
    if (kind == TaskHead::Kind::pretraining)
      return "pre-training a ModernBERT model (its masked-language head) is not built; fine-tune "
             "it (task: glue) or run it (task: inference)";
    return {};
  }
  const char* intermediate_weight() const override { return "encoder.layer.0.mlp.Wi.weight"; }

  // Dropout after the attention and after the MLP, as BERT's.
  std::uint64_t hidden_dropouts_per_layer() const override { return 2; }

  // The residual stream alternates between two roles so an inference
  // linear never writes the tensor it adds.
  int encoder_layer(EncoderOps& ops, std::int64_t layer, int x) const override {
    const BertConfig& c = ops.config();
    const auto& m = c.modernbert;
    const std::int64_t h = c.hidden_size, i = c.intermediate_size;
    const std::string p = encoder_layer_prefix(layer);
    return ops.layer(layer, p, [&] {
      int normed = x;
      if (layer > 0) {
        const auto [g, b] = ops.norm_params(p + "attn_norm");
        normed = ops.layernorm(x, g, b, "normed");
      }
      const auto [qkv_w, qkv_b] = ops.dense_params(p + "attn.Wqkv", 3 * h, h);
      const auto [o_w, o_b] = ops.dense_params(p + "attn.Wo", h, h);
      const auto [mg, mb] = ops.norm_params(p + "mlp_norm");
      const auto [i_w, i_b] = ops.dense_params(p + "mlp.Wi", 2 * i, h);
      const auto [f_w, f_b] = ops.dense_params(p + "mlp.Wo", h, i);
      // The int8 names are BERT's roles (int8_scales.hpp int8_linear_names).
      const int qkv = ops.linear(normed, qkv_w, qkv_b, 3 * h, Activation::none, std::nullopt, "qkv",
                                 p + "attention.self.qkv");
      const bool global = m.global_layer(layer);
      const int rotated = ops.rotary(qkv, global ? m.global_rope_theta : m.local_rope_theta);
      const int context = ops.attention(rotated, global ? 0 : m.local_attention / 2);
      const int x1 = ops.linear(context, o_w, o_b, h, Activation::none, x, "stream a",
                                p + "attention.output.dense");
      const int mlp_normed = ops.layernorm(x1, mg, mb, "mlp normed");
      const int up = ops.linear(mlp_normed, i_w, i_b, 2 * i, Activation::none, std::nullopt,
                                "mlp in", p + "intermediate.dense");
      const int gated =
          ops.elementwise(OpKind::geglu, OpKind::geglu_backward, up, {ops.tokens(), i}, "geglu");
      return ops.linear(gated, f_w, f_b, h, Activation::none, x1, "stream b", p + "output.dense");
    });
  }
  int after_encoder(EncoderOps& ops, int x) const override {
    const auto [g, b] = ops.norm_params("bert.encoder.final_norm");
    return ops.layernorm(x, g, b, "final normed");
  }

 private:
  static bool is_norm_name(const std::string& name) {
    return name.find("norm.") != std::string::npos || name.find("LayerNorm.") != std::string::npos;
  }
};

}  // namespace

const ModelFamily& modernbert_family() {
  static const ModernBertFamily family;
  return family;
}

}  // namespace polyhal::families
