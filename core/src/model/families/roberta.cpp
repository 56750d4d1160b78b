// RoBERTa (Liu et al. 2019) and the families transformers builds on its
// classes, XLM-RoBERTa (Conneau et al. 2020) and CamemBERT (Martin et al.
// 2020): BERT's post-norm layers, with fairseq's positions (a sequence's
// first token at pad_token_id + 1), one token type, their own names
// ("roberta." for "bert.") and RobertaClassificationHead (dense, tanh,
// out_proj on <s>: BERT's pooler and classifier under other names).
#include <fmt/format.h>

#include <string_view>

#include "model/families/bert_family.hpp"
#include "polyhal/error.hpp"

namespace polyhal::families {
namespace {

// Longest first: the first prefix a name starts with is its own.
constexpr CheckpointPrefix kRobertaPrefixes[] = {
    {"classifier.out_proj.", "classifier."},
    {"classifier.dense.", "bert.pooler.dense."},
    {"lm_head.layer_norm.", "cls.predictions.transform.LayerNorm."},
    {"lm_head.dense.", "cls.predictions.transform.dense."},
    {"lm_head.decoder.", "cls.predictions.decoder."},  // tied: left out as BERT's is
    {"lm_head.bias", "cls.predictions.bias"},
    {"roberta.", "bert."},
};

class RobertaFamily final : public BertFamily {
 public:
  RobertaFamily(ModelType type, const char* name, const char* title, const char* class_prefix)
      : type_(type), name_(name), title_(title), class_prefix_(class_prefix) {}
  ModelType type() const override { return type_; }
  const char* name() const override { return name_; }
  const char* title() const override { return title_; }
  std::span<const FamilyPreset> presets() const override { return {}; }

  void read_config(const ConfigJson& json, BertConfig& c) const override {
    read_fairseq_positions(json, c, title_);
  }
  void write_config(const BertConfig& c, nlohmann::json& json) const override {
    json["max_position_embeddings"] = c.max_position_embeddings + c.position_offset;
  }
  void validate(const BertConfig& c, const std::string& where) const override {
    if (c.position_offset != c.pad_token_id + 1)
      throw ConfigError(fmt::format("{}: a {} model's positions start at pad_token_id + 1 ({})",
                                    where, title_, c.pad_token_id + 1));
  }

  std::optional<std::string> polyhal_name(const std::string& name) const override {
    return renamed_prefix(kRobertaPrefixes, name);
  }
  std::string checkpoint_name(const std::string& name, const TaskHead& head) const override {
    return dense_head_checkpoint_name(name, head, "roberta.");
  }
  std::string architecture(const TaskHead& head) const override {
    return family_architecture(class_prefix_, head);
  }
  std::string task_problem(TaskHead::Kind kind, bool) const override {
    if (kind != TaskHead::Kind::pretraining) return {};
    return fmt::format(
        "pre-training a {} model is not built (its masked-LM head alone, without BERT's "
        "next-sentence head); fine-tune it (task: finetune) or run it (task: inference)",
        title_);
  }

 private:
  ModelType type_;
  const char* name_;
  const char* title_;
  std::string class_prefix_;
};

}  // namespace

const ModelFamily& roberta_family() {
  static const RobertaFamily family(ModelType::roberta, "roberta", "RoBERTa", "Roberta");
  return family;
}
const ModelFamily& xlm_roberta_family() {
  static const RobertaFamily family(ModelType::xlm_roberta, "xlm-roberta", "XLM-RoBERTa",
                                    "XLMRoberta");
  return family;
}
const ModelFamily& camembert_family() {
  static const RobertaFamily family(ModelType::camembert, "camembert", "CamemBERT", "Camembert");
  return family;
}

}  // namespace polyhal::families
