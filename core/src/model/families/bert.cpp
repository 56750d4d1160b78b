// BERT (Devlin et al. 2019), as Hugging Face's BertModel names it: post-norm
// layers of attention then a GELU feed-forward, each `LayerNorm(x + .)`.
#include <fmt/format.h>

#include <string_view>

#include "model/families/bert_family.hpp"

namespace polyhal::families {
namespace {

// Google's BERT miniatures and the two original sizes; FFN is 4 x hidden.
constexpr FamilyPreset kBertPresets[] = {{"tiny", 2, 128, 2},   {"mini", 4, 256, 4},
                                         {"small", 4, 512, 8},  {"medium", 8, 512, 8},
                                         {"base", 12, 768, 12}, {"large", 24, 1024, 16}};

}  // namespace

std::string dense_head_checkpoint_name(const std::string& name, const TaskHead& head,
                                       const char* encoder) {
  const auto replaced = [&](std::string_view from, std::string_view to) {
    return std::string(to) + name.substr(from.size());
  };
  const bool classifier = head.kind == TaskHead::Kind::classification;
  if (classifier && name.starts_with("bert.pooler.dense."))
    return replaced("bert.pooler.dense.", "classifier.dense.");
  if (classifier && name.starts_with("classifier."))
    return replaced("classifier.", "classifier.out_proj.");
  if (name.starts_with("bert.")) return replaced("bert.", encoder);
  return name;
}

void read_fairseq_positions(const ConfigJson& json, BertConfig& c, const char* title) {
  if (!json.has("pad_token_id") || json.at("pad_token_id").is_null()) c.pad_token_id = 1;
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size)
    json.fail("pad_token_id", fmt::format("expected a token id below vocab_size {}, got {}",
                                          c.vocab_size, c.pad_token_id));
  c.position_offset = c.pad_token_id + 1;
  if (c.max_position_embeddings <= c.position_offset)
    json.fail("max_position_embeddings",
              fmt::format("{} rows leave no position after pad_token_id {} ({} positions start "
                          "at pad_token_id + 1)",
                          c.max_position_embeddings, c.pad_token_id, title));
  c.max_position_embeddings -= c.position_offset;
}

std::optional<std::string> renamed_layer_part(std::span<const LayerName> names,
                                              std::string_view layer_part, bool to_bert) {
  const auto dot = layer_part.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view number = layer_part.substr(0, dot), rest = layer_part.substr(dot + 1);
  for (const auto& [family, bert] : names) {
    const std::string_view from = to_bert ? family : bert, to = to_bert ? bert : family;
    if (rest.starts_with(from)) return fmt::format("{}.{}{}", number, to, rest.substr(from.size()));
  }
  return std::nullopt;
}

std::string family_architecture(std::string_view prefix, const TaskHead& head) {
  return std::string(prefix) + hf_architecture(head).substr(std::string_view("Bert").size());
}

std::span<const FamilyPreset> BertFamily::presets() const {
  return kBertPresets;
}

std::int64_t BertFamily::layer_parameters(const BertConfig& c) const {
  const std::int64_t h = c.hidden_size, i = c.intermediate_size;
  return 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h;
}

void BertFamily::layer_tensor_shapes(const BertConfig& c, const std::string& p,
                                     std::vector<std::pair<std::string, Shape>>& shapes) const {
  const std::int64_t h = c.hidden_size, i = c.intermediate_size;
  for (const char* proj : {"attention.self.query", "attention.self.key", "attention.self.value",
                           "attention.output.dense"}) {
    shapes.push_back({p + proj + ".weight", {h, h}});
    shapes.push_back({p + proj + ".bias", {h}});
  }
  shapes.push_back({p + "attention.output.LayerNorm.weight", {h}});
  shapes.push_back({p + "attention.output.LayerNorm.bias", {h}});
  shapes.push_back({p + "intermediate.dense.weight", {i, h}});
  shapes.push_back({p + "intermediate.dense.bias", {i}});
  shapes.push_back({p + "output.dense.weight", {h, i}});
  shapes.push_back({p + "output.dense.bias", {h}});
  shapes.push_back({p + "output.LayerNorm.weight", {h}});
  shapes.push_back({p + "output.LayerNorm.bias", {h}});
}

int BertFamily::encoder_layer(EncoderOps& ops, std::int64_t layer, int x) const {
  const std::int64_t h = ops.config().hidden_size, i = ops.config().intermediate_size;
  const std::string p = encoder_layer_prefix(layer);
  return ops.layer(layer, p, [&] {
    const auto [qkv_w, qkv_b] = ops.fused_qkv(p);
    const auto [o_w, o_b] = ops.dense_params(p + "attention.output.dense", h, h);
    const auto [g1, b1] = ops.norm_params(p + "attention.output.LayerNorm");
    const auto [i_w, i_b] = ops.dense_params(p + "intermediate.dense", i, h);
    const auto [f_w, f_b] = ops.dense_params(p + "output.dense", h, i);
    const auto [g2, b2] = ops.norm_params(p + "output.LayerNorm");
    const int qkv = ops.linear(x, qkv_w, qkv_b, 3 * h, Activation::none, std::nullopt, "qkv",
                               p + "attention.self.qkv");
    const int context = ops.attention(qkv, 0);
    const int s1 = ops.linear(context, o_w, o_b, h, Activation::none, x, "attention out",
                              p + "attention.output.dense");
    const int x1 = ops.layernorm(s1, g1, b1, "block");
    const int f = ops.linear(x1, i_w, i_b, i, Activation::gelu, std::nullopt, "intermediate",
                             p + "intermediate.dense");
    const int s2 = ops.linear(f, f_w, f_b, h, Activation::none, x1, "ffn out", p + "output.dense");
    return ops.layernorm(s2, g2, b2, "hidden");
  });
}

const ModelFamily& bert_family() {
  static const BertFamily family;
  return family;
}

}  // namespace polyhal::families
