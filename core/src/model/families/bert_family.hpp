#pragma once
// BERT's family (bert.cpp), which RoBERTa's families (roberta.cpp) extend:
// the same post-norm layers, with their own names, positions and heads.
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "model/families/model_family.hpp"

namespace polyhal::families {

/// The export name of polyhal's tensor `name` for a family whose
/// checkpoints name the encoder `encoder` ("roberta.") and whose
/// classification head is RobertaClassificationHead's (classifier.dense
/// for BERT's pooler, classifier.out_proj for its classifier).
std::string dense_head_checkpoint_name(const std::string& name, const TaskHead& head,
                                       const char* encoder);

/// fairseq's positions (RoBERTa's families, MPNet): a sequence's first token
/// reads row pad_token_id + 1 (pad_token_id 1 when the file names none), so
/// the table is kept from that row (BertConfig::position_offset); `title`
/// names the family in errors.
void read_fairseq_positions(const ConfigJson& json, BertConfig& c, const char* title);

/// A name within a layer in a family's checkpoints, and BERT's for it.
using LayerName = std::pair<std::string_view, std::string_view>;
/// "<N>.<rest>" (what follows the layers' prefix) with the start of `rest`
/// renamed by the first of `names` it starts with: the family's to BERT's
/// (`to_bert`) or back; nullopt when none does.
std::optional<std::string> renamed_layer_part(std::span<const LayerName> names,
                                              std::string_view layer_part, bool to_bert);

/// transformers' class of `head` for a family whose classes begin with
/// `prefix` in place of "Bert" ("Roberta" + "ForSequenceClassification").
std::string family_architecture(std::string_view prefix, const TaskHead& head);

class BertFamily : public ModelFamily {
 public:
  ModelType type() const override { return ModelType::bert; }
  const char* name() const override { return "bert"; }
  const char* title() const override { return "BERT"; }
  std::span<const FamilyPreset> presets() const override;
  std::span<const char* const> own_keys() const override { return {}; }
  void read_config(const ConfigJson&, BertConfig&) const override {}
  void write_config(const BertConfig&, nlohmann::json&) const override {}
  void validate(const BertConfig&, const std::string&) const override {}
  std::string sequence_problem(const BertConfig&, std::int64_t, const std::string&) const override {
    return {};
  }

  std::int64_t layer_parameters(const BertConfig& c) const override;
  std::int64_t final_parameters(const BertConfig&) const override { return 0; }
  void layer_tensor_shapes(const BertConfig& c, const std::string& p,
                           std::vector<std::pair<std::string, Shape>>& shapes) const override;
  void final_tensor_shapes(const BertConfig&,
                           std::vector<std::pair<std::string, Shape>>&) const override {}
  const char* intermediate_weight() const override {
    return "encoder.layer.0.intermediate.dense.weight";
  }

  // Dropout after attention and after the feed-forward.
  std::uint64_t hidden_dropouts_per_layer() const override { return 2; }
  int encoder_layer(EncoderOps& ops, std::int64_t layer, int x) const override;
  int after_encoder(EncoderOps&, int x) const override { return x; }
};

}  // namespace polyhal::families
