// MPNet (Song et al. 2020), as transformers' MPNetModel names it: BERT's
// post-norm layers (attention.attn.q/k/v/o, attention.LayerNorm), fairseq's
// positions from its fixed padding_idx 1, no token types, and a bucketed relative-position bias
// (encoder.relative_attention_bias, [buckets, heads], shared by the layers)
// added to every layer's attention scores (and its gradient in fine-tuning).
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "model/families/bert_family.hpp"

namespace polyhal::families {
namespace {

// transformers' MPNetEncoder: 32 buckets, distances up to 128.
constexpr std::int64_t kBuckets = 32, kMaxDistance = 128;
constexpr std::int64_t kPaddingIdx = 1;  // MPNetEmbeddings', fixed in its code

// MPNet's name within a layer, and BERT's.
constexpr std::array<LayerName, 5> kLayerNames{{
    {"attention.attn.q.", "attention.self.query."},
    {"attention.attn.k.", "attention.self.key."},
    {"attention.attn.v.", "attention.self.value."},
    {"attention.attn.o.", "attention.output.dense."},
    {"attention.LayerNorm.", "attention.output.LayerNorm."},
}};

constexpr CheckpointPrefix kHeadPrefixes[] = {
    {"classifier.out_proj.", "classifier."},
    {"classifier.dense.", "bert.pooler.dense."},
};

constexpr std::string_view kPrefix = "mpnet.", kLayers = "encoder.layer.";

std::optional<std::string> renamed_layer(std::string_view layer_part, bool to_bert) {
  return renamed_layer_part(kLayerNames, layer_part, to_bert);
}

class MpnetFamily final : public BertFamily {
 public:
  ModelType type() const override { return ModelType::mpnet; }
  const char* name() const override { return "mpnet"; }
  const char* title() const override { return "MPNet"; }
  std::span<const FamilyPreset> presets() const override { return {}; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    // MPNetEmbeddings' padding_idx is 1 whatever pad_token_id says: a
    // sequence's first token reads row 2.
    c.position_offset = kPaddingIdx + 1;
    if (c.max_position_embeddings <= c.position_offset)
      json.fail("max_position_embeddings",
                fmt::format("{} rows leave no position after MPNet's padding row {}",
                            c.max_position_embeddings, kPaddingIdx));
    c.max_position_embeddings -= c.position_offset;
    std::int64_t buckets = kBuckets;
    json.read("relative_attention_num_buckets", buckets);
    if (buckets != kBuckets)
      json.fail("relative_attention_num_buckets",
                fmt::format("{}: polyhal builds MPNet's {} buckets", buckets, kBuckets));
    c.type_vocab_size = 1;
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    json["max_position_embeddings"] = c.max_position_embeddings + c.position_offset;
    json["relative_attention_num_buckets"] = kBuckets;
    json.erase("type_vocab_size");
  }

  std::optional<std::string> polyhal_name(const std::string& name) const override {
    std::string_view rest = name;
    const bool prefixed = rest.starts_with(kPrefix);
    if (prefixed) rest.remove_prefix(kPrefix.size());
    if (rest == "encoder.relative_attention_bias.weight")
      return "bert.encoder.relative_attention_bias.weight";
    if (rest.starts_with(kLayers))
      if (auto layer = renamed_layer(rest.substr(kLayers.size()), true))
        return "bert.encoder.layer." + *layer;
    if (prefixed) return "bert." + std::string(rest);
    return renamed_prefix(kHeadPrefixes, name);
  }
  std::string checkpoint_name(const std::string& name, const TaskHead& head) const override {
    constexpr std::string_view kBertLayers = "bert.encoder.layer.";
    if (name.starts_with(kBertLayers))
      if (auto layer = renamed_layer(std::string_view(name).substr(kBertLayers.size()), false))
        return "mpnet.encoder.layer." + *layer;
    if (name == "bert.embeddings.token_type_embeddings.weight") return {};  // folded in
    return dense_head_checkpoint_name(name, head, "mpnet.");
  }
  bool token_types() const override { return false; }
  std::int64_t relative_buckets() const override { return kBuckets; }
  // transformers' MPNetEncoder.relative_position_bucket, in f32 as it computes.
  std::int32_t relative_bucket(std::int64_t relative) const override {
    const std::int64_t half = kBuckets / 2, exact = half / 2;
    std::int64_t n = -relative, bucket = n < 0 ? half : 0;
    n = std::llabs(n);
    if (n < exact) return static_cast<std::int32_t>(bucket + n);
    const float scaled = std::log(static_cast<float>(n) / static_cast<float>(exact)) /
                         static_cast<float>(std::log(static_cast<double>(kMaxDistance) /
                                                     static_cast<double>(exact))) *
                         static_cast<float>(half - exact);
    const auto large = std::min<std::int64_t>(exact + static_cast<std::int64_t>(scaled), half - 1);
    return static_cast<std::int32_t>(bucket + large);
  }
  void final_tensor_shapes(const BertConfig& c,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override {
    shapes.push_back(
        {"bert.encoder.relative_attention_bias.weight", {kBuckets, c.num_attention_heads}});
  }
  std::int64_t final_parameters(const BertConfig& c) const override {
    return kBuckets * c.num_attention_heads;
  }
  std::string architecture(const TaskHead& head) const override {
    return family_architecture("MPNet", head);
  }
  std::string task_problem(TaskHead::Kind kind, bool) const override {
    if (kind == TaskHead::Kind::pretraining)
      return "pre-training an MPNet model (permuted language modelling) is not built; fine-tune "
             "it (glue, squad) or run it (task: inference)";
    return {};
  }
};

}  // namespace

const ModelFamily& mpnet_family() {
  static const MpnetFamily family;
  return family;
}

}  // namespace polyhal::families
