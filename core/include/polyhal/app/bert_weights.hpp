#pragma once
/// @file bert_weights.hpp
/// BERT weights on the host, under Hugging Face names
/// ("bert.encoder.layer.0.attention.self.query.weight", "cls.predictions.bias",
/// "qa_outputs.weight", "classifier.bias"), for each head of TaskHead.
#include <cstdint>
#include <filesystem>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/safetensors.hpp"

namespace polyhal {

/// The Hugging Face names beside the encoder layers that tasks and the
/// served model read (an encoder layer's names are its family's:
/// core/src/model/families/).
inline constexpr const char* kPoolerWeight = "bert.pooler.dense.weight";
inline constexpr const char* kPoolerBias = "bert.pooler.dense.bias";
inline constexpr const char* kPoolerPrefix = "bert.pooler.";
inline constexpr const char* kWordEmbeddings = "bert.embeddings.word_embeddings.weight";

/// Every tensor the model class of `head` has, with its shape (the MLM
/// decoder weight is tied to the word embeddings and not listed).
/// Whether a tensor is a normalisation's gain or bias (BERT's `LayerNorm.`,
/// GroupBERT's `prenorm.`, `conv_norm.`, `final_norm.`): initialised to 1 and
/// 0, and exempt from weight decay and LAMB's trust ratio.
bool is_norm_parameter(const std::string& name);

std::vector<std::pair<std::string, Shape>> bert_tensor_shapes(const BertConfig& config,
                                                              const TaskHead& head = {});

/// Seeded initialisation as Hugging Face does it: normal(0, 0.02) weights and
/// embeddings, zero biases, LayerNorm weight 1 and bias 0.
TensorMap init_bert_weights(const BertConfig& config, std::uint64_t seed,
                            const TaskHead& head = {});

/// Loads weights from a .safetensors file and checks them against `config`
/// and `head`: exactly that model class's tensors. Accepts names with or
/// without the "bert." prefix and the old LayerNorm.gamma/beta names; a
/// checkpoint's optimizer state is left out. Throws ConfigError naming each
/// missing, extra or wrongly shaped tensor.
TensorMap load_bert_weights(const std::filesystem::path& file, const BertConfig& config,
                            const TaskHead& head = {});
/// The encoder and pooler of any BERT checkpoint (BertModel's tensors, as
/// sentence-transformers ships them; a BertFor... file's too): checked as
/// load_bert_weights checks them; another model class's head tensors are
/// left out and listed in `unused`. Tensors of no BERT are an error. A file
/// without the pooler (both its tensors absent, as transformers saves a
/// BertModel built with add_pooling_layer=False) loads with a zero pooler,
/// and `pooler_absent`, when given, is set: its pooled output means nothing.
/// `head_tensors`, when given, receives the head tensors left out (a
/// *ForMaskedLM file's cls.predictions.*, which SPLADE reads).
TensorMap load_bert_encoder_weights(const std::filesystem::path& file, const BertConfig& config,
                                    std::vector<std::string>* unused = nullptr,
                                    bool* pooler_absent = nullptr,
                                    TensorMap* head_tensors = nullptr);
/// A safetensors map with load_bert_weights' names: canonical BERT names
/// ("bert." prefix, LayerNorm weight/bias), optimizer state and buffers left out.
TensorMap canonical_bert_weights(TensorMap raw);
/// load_bert_weights' check of weights already in memory (canonical names);
/// `source` names where they came from in the error.
void check_bert_weights(const TensorMap& weights, const std::filesystem::path& source,
                        const BertConfig& config, const TaskHead& head = {});

/// Weights to fine-tune from, as Hugging Face's from_pretrained into another
/// model class: the encoder must be complete; the head's tensors found in
/// the file are used, the missing ones freshly initialised (as
/// init_bert_weights with `seed`), and another head's tensors left unused.
struct HeadStart {
  TensorMap weights;
  std::vector<std::string> initialised;  ///< head tensors not in the file
  std::vector<std::string> unused;       ///< tensors of another head (e.g. cls.* for SQuAD)
  /// Set when a shorter position table (phase 1's) was extended with fresh
  /// rows to the model's max_position_embeddings: says so.
  std::string extended;
};
/// Throws ConfigError naming each missing encoder tensor, wrongly shaped
/// tensor (a classifier fine-tuned for another label count) or tensor that no
/// BERT model has.
HeadStart load_bert_weights_for_head(const std::filesystem::path& file, const BertConfig& config,
                                     const TaskHead& head, std::uint64_t seed);

/// `weights` under the names transformers gives them for the family of
/// `config` and `head` ("roberta." for "bert.", RoBERTa's classifier.dense
/// and classifier.out_proj for BERT's pooler and classifier) and in its
/// shapes (a RoBERTa position table with its skipped rows, as zeros).
TensorMap checkpoint_tensors(const TensorMap& weights, const BertConfig& config,
                             const TaskHead& head);

/// Saves as Hugging Face does: "bert."-prefixed names, tied decoder omitted;
/// written atomically.
void save_bert_weights(const TensorMap& weights, DType dtype, const std::filesystem::path& file);

}  // namespace polyhal
