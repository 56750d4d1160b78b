#pragma once
/// @file bert_config.hpp
/// BERT dimensions: presets, explicit dims, and Hugging Face config.json.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// The shape of the batches a BERT model runs: sequences of `seq` tokens,
/// `batch` of them.
struct BertShape {
  std::int64_t batch = 1;
  std::int64_t seq = 128;
};

/// The encoder families polyhal builds, one file each under
/// core/src/model/families/ (config.json's "model_type", looked up once when
/// the config is read).
enum class ModelType : std::uint8_t {
  bert,
  groupbert,
  roberta,
  xlm_roberta,
  camembert,
  distilbert,
  electra,
  mpnet,
  modernbert
};

/// The dimensions of a BERT model, named as Hugging Face's BertConfig names them.
struct BertConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  std::string hidden_act = "gelu";  ///< exact erf GELU; the only one supported
  /// Carried from the file read to the config.json written (convert,
  /// exports), so a model keeps its own; training's dropout is model.dropout.
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  double initializer_range = 0.02;
  /// config.json's pad_token_id, carried to the config.json written.
  std::int64_t pad_token_id = 0;
  /// RoBERTa's families number a sequence's positions from pad_token_id + 1
  /// (fairseq's rule): the table's rows below are never read, so polyhal
  /// keeps it from that row on (max_position_embeddings counts the rows
  /// kept, the positions a sequence can use) and writes the rows it skipped
  /// back as zeros.
  std::int64_t position_offset = 0;
  /// ELECTRA's embedding_size where it is not hidden_size (ELECTRA-small):
  /// the embeddings are that wide and `embeddings_project` maps them to
  /// hidden_size. 0: hidden_size.
  std::int64_t embedding_size = 0;
  std::int64_t embedding_width() const { return embedding_size > 0 ? embedding_size : hidden_size; }
  /// The family (docs/groupbert.md for GroupBERT: four pre-norm modules per
  /// layer, a final LayerNorm, and the three keys below).
  ModelType model_type = ModelType::bert;
  std::int64_t ffn_output_groups = 4;  ///< groupbert_ffn_output_groups: G of the FFN output
  std::int64_t conv_group_size = 16;   ///< groupbert_conv_group_size: channels per conv group
  std::int64_t conv_kernel_size = 7;   ///< groupbert_conv_kernel_size: taps along the sequence
  /// ModernBERT (docs/bert.md, Model families): rotary bases of the global
  /// and the sliding-window layers, the window (local_attention: keys within
  /// half of it on each side), which layers are global (every Nth from 0),
  /// which of its linears and norms have biases, and the classifier's pooling.
  struct ModernBert {
    double global_rope_theta = 160000.0, local_rope_theta = 10000.0;
    std::int64_t local_attention = 128, global_attn_every_n_layers = 3;
    bool attention_bias = false, mlp_bias = false, norm_bias = false, classifier_bias = false;
    bool decoder_bias = true;
    std::string classifier_pooling = "cls";  ///< "cls" or "mean"
    bool global_layer(std::int64_t layer) const { return layer % global_attn_every_n_layers == 0; }
  } modernbert;

  std::int64_t head_size() const { return hidden_size / num_attention_heads; }
  /// Number of parameters of BertForPreTraining (decoder weight tied).
  std::int64_t parameter_count() const;
  /// Throws ConfigError (prefixed by `where`) if the dims are inconsistent.
  void validate(const std::string& where) const;
};

/// What sits on the encoder, as Hugging Face's model classes and weight
/// names: BertForPreTraining (MLM + NSP heads, `cls.*`),
/// BertForQuestionAnswering (`qa_outputs` Linear(H, 2): start and end logits
/// per token, no pooler) or BertForSequenceClassification (`classifier`
/// Linear(H, num_labels) on the pooled output; num_labels 1 is regression
/// with mean squared error, as STS-B).
struct TaskHead {
  enum class Kind : std::uint8_t { pretraining, question_answering, classification };
  Kind kind = Kind::pretraining;
  std::int64_t num_labels = 2;      ///< classification only
  std::vector<std::string> labels;  ///< classification: label names for config.json (optional)
  /// Classification: labels scored each on its own (sigmoid), as config.json's
  /// problem_type multi_label_classification says; else one of them (softmax).
  bool multi_label = false;
};

/// Pipelining: the part of the model one stage holds. Stage 0 has the
/// embeddings, the last stage the heads and loss; each has encoder layers
/// [first_layer, last_layer) (-1: through the last layer).
struct PipelineStage {
  std::int64_t first_layer = 0;
  std::int64_t last_layer = -1;
  bool embeddings = true, heads = true;
};

/// "BertForPreTraining", "BertForQuestionAnswering" or "BertForSequenceClassification".
std::string hf_architecture(const TaskHead& head);

/// Preset names: tiny (L2 H128 A2), mini (L4 H256 A4), small (L4 H512 A8),
/// medium (L8 H512 A8), base (L12 H768 A12), large (L24 H1024 A16); FFN 4H;
/// and groupbert-mini, -medium, -base, -large (Graphcore's GroupBERT configs:
/// the same sizes, G 4, conv groups of 16, kernel 7, LayerNorm eps 1e-3).
const std::vector<std::string>& bert_preset_names();
/// The preset `name`; throws ConfigError naming the presets that exist.
BertConfig bert_preset(const std::string& name);

/// Reads a Hugging Face config.json, or Google's or Graphcore's
/// bert_config.json (Graphcore's groupbert flag set to true selects
/// GroupBERT; the keys polyhal has no use for are ignored). Errors name the
/// file and the key.
BertConfig read_hf_config(const std::filesystem::path& file);
/// The head a Hugging Face config.json's "architectures" names
/// (BertForSequenceClassification with id2label's labels and problem_type,
/// BertForQuestionAnswering; any *For...Classification or
/// *ForQuestionAnswering class), or nullopt for another class or none.
/// Errors name the file and the key.
std::optional<TaskHead> read_hf_head(const std::filesystem::path& file);
/// Writes a Hugging Face config.json for the model class of `head`
/// (architectures, and for classification id2label/label2id and
/// problem_type), atomically: a crash leaves the old file or the new one.
void write_hf_config(const BertConfig& config, const std::filesystem::path& file,
                     const TaskHead& head = {});

}  // namespace polyhal
