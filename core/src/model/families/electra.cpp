// ELECTRA (Clark et al. 2020), the discriminator as an encoder: BERT's
// layers and embeddings under "electra." (embeddings of embedding_size and
// embeddings_project to hidden_size where they differ), no pooler, and
// ElectraClassificationHead (dense, GELU, out_proj on [CLS]: BERT's pooler
// with GELU for tanh, and its classifier, under RoBERTa's head names).
#include <fmt/format.h>

#include <string_view>

#include "model/families/bert_family.hpp"

namespace polyhal::families {
namespace {

constexpr CheckpointPrefix kElectraPrefixes[] = {
    {"classifier.out_proj.", "classifier."},
    {"classifier.dense.", "bert.pooler.dense."},
    {"electra.", "bert."},
};

class ElectraFamily final : public BertFamily {
 public:
  ModelType type() const override { return ModelType::electra; }
  const char* name() const override { return "electra"; }
  const char* title() const override { return "ELECTRA"; }
  std::span<const FamilyPreset> presets() const override { return {}; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    std::int64_t embedding_size = c.hidden_size;
    json.read("embedding_size", embedding_size);
    if (embedding_size < 1 || embedding_size > (std::int64_t{1} << 16))
      json.fail("embedding_size",
                fmt::format("expected 1 to {}, got {}", std::int64_t{1} << 16, embedding_size));
    // ELECTRA-small: embeddings narrower than the layers, and embeddings_project.
    if (embedding_size != c.hidden_size) c.embedding_size = embedding_size;
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    json["embedding_size"] = c.embedding_width();
  }
  std::optional<std::string> polyhal_name(const std::string& name) const override {
    return renamed_prefix(kElectraPrefixes, name);
  }
  bool ignored_tensor(const std::string& name) const override {
    // ElectraForPreTraining's discriminator head: a start for fine-tuning.
    return name.starts_with("discriminator_predictions.");
  }
  std::string checkpoint_name(const std::string& name, const TaskHead& head) const override {
    return dense_head_checkpoint_name(name, head, "electra.");
  }
  std::string architecture(const TaskHead& head) const override {
    return family_architecture("Electra", head);
  }
  Activation pooler_activation() const override { return Activation::gelu; }
  std::string task_problem(TaskHead::Kind kind, bool) const override {
    if (kind != TaskHead::Kind::pretraining) return {};
    return "pre-training an ELECTRA model (a generator and a replaced-token discriminator) is not "
           "built; fine-tune its discriminator (task: glue or squad) or run it (task: inference)";
  }
};

}  // namespace

const ModelFamily& electra_family() {
  static const ElectraFamily family;
  return family;
}

}  // namespace polyhal::families
