// GroupBERT (Chelombiev et al. 2021; docs/groupbert.md): four pre-norm
// modules per layer (convolution, FFN, attention, FFN), each
// `x + dropout(module(LayerNorm(x)))`, grouped FFN down-projections, and a
// LayerNorm after the last layer.
#include <fmt/format.h>

#include "model/families/model_family.hpp"
#include "polyhal/error.hpp"

namespace polyhal::families {
namespace {

// Graphcore's configs/groupbert/*.json: BERT's sizes, G 4, conv groups of
// 16, kernel 7, LayerNorm eps 1e-3.
constexpr FamilyPreset kGroupbertPresets[] = {{"groupbert-mini", 4, 256, 4},
                                              {"groupbert-medium", 8, 512, 8},
                                              {"groupbert-base", 12, 768, 12},
                                              {"groupbert-large", 24, 1024, 16}};
constexpr const char* kGroupbertKeys[] = {
    "groupbert_ffn_output_groups", "groupbert_conv_group_size", "groupbert_conv_kernel_size"};
constexpr double kGraphcoreLayerNormEps = 1e-3;

/// The FFN module: up-projection with GELU, the grouped down-projection,
/// then (with more than one group) the mixer, dropout and the residual.
int grouped_feed_forward(EncoderOps& ops, const std::string& p, int x, const std::string& role) {
  const BertConfig& c = ops.config();
  const std::int64_t h = c.hidden_size, i = c.intermediate_size, g = c.ffn_output_groups;
  const auto [ng, nb] = ops.norm_params(p + "prenorm");
  const auto [i_w, i_b] = ops.dense_params(p + "intermediate", i, h);
  const auto [o_w, o_b] = ops.dense_params(p + "output", h, i / g);
  const int normed = ops.layernorm(x, ng, nb, "normed");
  const int up = ops.linear(normed, i_w, i_b, i, Activation::gelu, std::nullopt, "intermediate");
  if (g == 1) return ops.linear(up, o_w, o_b, h, Activation::none, x, role);
  const auto [m_w, m_b] = ops.dense_params(p + "mixer", h, h);
  const int down = ops.grouped_dense(up, o_w, o_b, g, "grouped");
  return ops.linear(down, m_w, m_b, h, Activation::none, x, role);
}

/// The convolution module: GLU, the grouped sequence convolution, its
/// LayerNorm, swish, the output projection and the residual.
int convolution(EncoderOps& ops, const std::string& p, int x, const std::string& role) {
  const BertConfig& c = ops.config();
  const std::int64_t h = c.hidden_size, rows = ops.tokens();
  const auto [g, b] = ops.norm_params(p + "convolution.prenorm");
  const auto [glu_w, glu_b] = ops.fused_dense(
      p + "convolution.glu", {p + "convolution.glu_values", p + "convolution.glu_gates"});
  const int conv_w =
      ops.param(p + "convolution.conv.weight", {h, c.conv_group_size, c.conv_kernel_size});
  const auto [ng, nb] = ops.norm_params(p + "convolution.conv_norm");
  const auto [post_w, post_b] = ops.dense_params(p + "convolution.post", h, h);
  const int normed = ops.layernorm(x, g, b, "normed");
  const int gate_in =
      ops.linear(normed, glu_w, glu_b, 2 * h, Activation::none, std::nullopt, "glu in");
  const int gated = ops.elementwise(OpKind::glu, OpKind::glu_backward, gate_in, {rows, h}, "glu");
  const int conv = ops.sequence_conv(gated, conv_w);
  const int conv_normed = ops.layernorm(conv, ng, nb, "conv normed");
  const int swished =
      ops.elementwise(OpKind::swish, OpKind::swish_backward, conv_normed, {rows, h}, "swish");
  return ops.linear(swished, post_w, post_b, h, Activation::none, x, role);
}

class GroupbertFamily final : public ModelFamily {
 public:
  ModelType type() const override { return ModelType::groupbert; }
  const char* name() const override { return "groupbert"; }
  const char* title() const override { return "GroupBERT"; }
  std::span<const FamilyPreset> presets() const override { return kGroupbertPresets; }
  void preset_defaults(BertConfig& c) const override { c.layer_norm_eps = kGraphcoreLayerNormEps; }
  std::span<const char* const> own_keys() const override { return kGroupbertKeys; }
  // Graphcore's TensorFlow configs say "groupbert": true.
  const char* marker_key() const override { return "groupbert"; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    if (!json.has("layer_norm_eps")) c.layer_norm_eps = kGraphcoreLayerNormEps;
    json.read(kGroupbertKeys[0], c.ffn_output_groups);
    json.read(kGroupbertKeys[1], c.conv_group_size);
    json.read(kGroupbertKeys[2], c.conv_kernel_size);
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    json[kGroupbertKeys[0]] = c.ffn_output_groups;
    json[kGroupbertKeys[1]] = c.conv_group_size;
    json[kGroupbertKeys[2]] = c.conv_kernel_size;
  }

  void validate(const BertConfig& c, const std::string& where) const override {
    const auto within = [&](std::int64_t v, const char* key, std::int64_t most) {
      if (v <= 0 || v > most)
        throw ConfigError(fmt::format("{}: key '{}': expected a positive integer up to {}, got {}",
                                      where, key, most, v));
    };
    within(c.ffn_output_groups, kGroupbertKeys[0], 1024);
    within(c.conv_group_size, kGroupbertKeys[1], std::int64_t{1} << 16);
    within(c.conv_kernel_size, kGroupbertKeys[2], 1024);
    if (c.intermediate_size % c.ffn_output_groups != 0 || c.hidden_size % c.ffn_output_groups != 0)
      throw ConfigError(fmt::format(
          "{}: key 'groupbert_ffn_output_groups': {} groups do not divide intermediate_size {} "
          "and hidden_size {}",
          where, c.ffn_output_groups, c.intermediate_size, c.hidden_size));
    if (c.hidden_size % c.conv_group_size != 0)
      throw ConfigError(
          fmt::format("{}: key 'groupbert_conv_group_size': {} does not divide hidden_size {}",
                      where, c.conv_group_size, c.hidden_size));
  }
  std::string sequence_problem(const BertConfig& c, std::int64_t seq,
                               const std::string& source) const override {
    if (c.conv_kernel_size <= seq) return {};
    if (source.empty())
      return fmt::format(
          "key 'groupbert_conv_kernel_size': a kernel of {} positions is longer than the sequence "
          "length {}",
          c.conv_kernel_size, seq);
    return fmt::format(
        "{} tokens, fewer than GroupBERT's convolution kernel of {} positions "
        "(groupbert_conv_kernel_size of {})",
        seq, c.conv_kernel_size, source);
  }

  // docs/groupbert.md, Parameters per layer.
  std::int64_t layer_parameters(const BertConfig& c) const override {
    const std::int64_t h = c.hidden_size, i = c.intermediate_size, g = c.ffn_output_groups;
    const std::int64_t conv =
        2 * (h * h + h) + c.conv_kernel_size * c.conv_group_size * h + 2 * h + (h * h + h) + 2 * h;
    const std::int64_t ffn = (h * i + i) + (i * h / g + h) + (g > 1 ? h * h + h : 0) + 2 * h;
    return conv + 2 * ffn + 4 * (h * h + h) + 2 * h;
  }
  std::int64_t final_parameters(const BertConfig& c) const override { return 2 * c.hidden_size; }

  // docs/groupbert.md, Checkpoint names.
  void layer_tensor_shapes(const BertConfig& c, const std::string& p,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override {
    const std::int64_t h = c.hidden_size, i = c.intermediate_size, g = c.ffn_output_groups;
    LayerTensorList list(shapes, p, h);
    list.norm("convolution.prenorm");
    list.dense("convolution.glu_values", h, h);
    list.dense("convolution.glu_gates", h, h);
    shapes.push_back({p + "convolution.conv.weight", {h, c.conv_group_size, c.conv_kernel_size}});
    list.norm("convolution.conv_norm");
    list.dense("convolution.post", h, h);
    for (const char* ffn : {"feed_forward_1.", "feed_forward_2."}) {
      list.norm(std::string(ffn) + "prenorm");
      list.dense(std::string(ffn) + "intermediate", i, h);
      list.dense(std::string(ffn) + "output", h, i / g);
      if (g > 1) list.dense(std::string(ffn) + "mixer", h, h);
    }
    list.norm("attention.prenorm");
    for (const char* proj :
         {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output"})
      list.dense(proj, h, h);
  }
  void final_tensor_shapes(const BertConfig& c,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override {
    shapes.push_back({"bert.encoder.final_norm.weight", {c.hidden_size}});
    shapes.push_back({"bert.encoder.final_norm.bias", {c.hidden_size}});
  }
  const char* intermediate_weight() const override {
    return "encoder.layer.0.feed_forward_1.intermediate.weight";
  }

  // Dropout after each of the four modules.
  std::uint64_t hidden_dropouts_per_layer() const override { return 4; }

  // The residual stream alternates between two roles so an inference
  // linear never writes the tensor it adds.
  int encoder_layer(EncoderOps& ops, std::int64_t layer, int input) const override {
    const std::int64_t h = ops.config().hidden_size;
    const std::string p = encoder_layer_prefix(layer);
    return ops.layer(layer, p, [&] {
      int x = convolution(ops, p, input, "stream a");
      x = grouped_feed_forward(ops, p + "feed_forward_1.", x, "stream b");
      const auto [g, b] = ops.norm_params(p + "attention.prenorm");
      const auto [qkv_w, qkv_b] = ops.fused_qkv(p);
      const auto [o_w, o_b] = ops.dense_params(p + "attention.output", h, h);
      const int normed = ops.layernorm(x, g, b, "normed");
      const int qkv =
          ops.linear(normed, qkv_w, qkv_b, 3 * h, Activation::none, std::nullopt, "qkv");
      x = ops.linear(ops.attention(qkv, 0), o_w, o_b, h, Activation::none, x, "stream a");
      return grouped_feed_forward(ops, p + "feed_forward_2.", x, "stream b");
    });
  }
  int after_encoder(EncoderOps& ops, int x) const override {
    const auto [g, b] = ops.norm_params("bert.encoder.final_norm");
    return ops.layernorm(x, g, b, "final normed");
  }
};

}  // namespace

const ModelFamily& groupbert_family() {
  static const GroupbertFamily family;
  return family;
}

}  // namespace polyhal::families
