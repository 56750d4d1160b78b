#pragma once
/// @file model_family.hpp
/// What an encoder family is to polyhal: its config.json mapping, its
/// presets, its weight names and its encoder layer. One file per family
/// (families/bert.cpp, families/groupbert.cpp) implements ModelFamily; the
/// registry (families/registry.cpp) lists them, so adding a family is a new
/// file, a registry line and its golden test. Everything else (the
/// embeddings, the heads, the loaders, the plan, the device models) asks
/// the family of a BertConfig instead of naming one.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "polyhal/app/bert_config.hpp"
#include "polyhal/op_schema.hpp"
#include "polyhal/tensor.hpp"

namespace polyhal::families {

/// The operations an encoder layer is declared in. bert_program.cpp's
/// builder implements them, lowering each to inference ops (fused epilogues,
/// shared activations) or to training ops with their backward; a family
/// writes its layer once in these terms. Tensors are program tensor ids.
class EncoderOps {
 public:
  virtual ~EncoderOps() = default;
  virtual const BertConfig& config() const = 0;
  virtual std::int64_t tokens() const = 0;
  /// A parameter under its Hugging Face name.
  virtual int param(const std::string& name, Shape shape) = 0;
  /// `prefix`.weight [out, in] and `prefix`.bias [out].
  virtual std::pair<int, int> dense_params(const std::string& prefix, std::int64_t out,
                                           std::int64_t in) = 0;
  /// `prefix`.weight and .bias of a LayerNorm over the hidden size.
  virtual std::pair<int, int> norm_params(const std::string& prefix) = 0;
  /// Dense layers of one input as row views of one weight named `fused`.
  virtual std::pair<int, int> fused_dense(const std::string& fused,
                                          const std::vector<std::string>& parts) = 0;
  /// `prefix`attention.self.{query,key,value} fused into one [3H, H] GEMM.
  virtual std::pair<int, int> fused_qkv(const std::string& prefix) = 0;
  /// y = act(x W^T + b) [+ dropout(.) + residual]; `encoder_linear` names
  /// an int8-capable encoder linear (int8_scales.hpp).
  virtual int linear(int x, int w, int bias, std::int64_t out, Activation activation,
                     std::optional<int> residual, const std::string& role,
                     const std::string& encoder_linear = {}) = 0;
  virtual int layernorm(int x, int gamma, int beta, const std::string& role) = 0;
  /// Multi-head self-attention over a fused [tokens, 3H] QKV; `window` > 0
  /// attends only keys at most that many rows away (AttentionAttrs::window).
  virtual int attention(int qkv, std::int64_t window) = 0;
  /// Rotary positions with base `theta` on the q and k of a fused QKV.
  virtual int rotary(int qkv, double theta) = 0;
  /// glu or swish (with their backward ops).
  virtual int elementwise(OpKind op, OpKind backward_op, int x, Shape shape,
                          const std::string& role) = 0;
  /// Grouped convolution along each sequence: weight [H, group, kernel].
  virtual int sequence_conv(int x, int w) = 0;
  /// x [tokens, I] times a weight of `groups` diagonal blocks [H, I/groups].
  virtual int grouped_dense(int x, int w, int bias, std::int64_t groups,
                            const std::string& role) = 0;
  /// Declares layer `layer`'s ops (named under `prefix`) with `body`, which
  /// returns the layer's output; recomputation in backward is handled here.
  virtual int layer(std::int64_t layer, const std::string& prefix,
                    const std::function<int()>& body) = 0;
};

/// A named size of a family: L layers, H hidden, A heads, FFN 4H.
struct FamilyPreset {
  const char* name;
  std::int64_t layers, hidden, heads;
};

/// A config.json's object, read key by key with its type checked; errors
/// name the file and the key.
class ConfigJson {
 public:
  ConfigJson(const nlohmann::json& json, std::string file) : json_(json), file_(std::move(file)) {}
  bool has(const char* key) const { return json_.contains(key); }
  const nlohmann::json& at(const char* key) const { return json_.at(key); }
  const std::string& file() const { return file_; }
  void read(const char* key, std::int64_t& field) const;
  void read(const char* key, double& field) const;
  void read(const char* key, std::string& field) const;
  void read(const char* key, bool& field) const;
  /// ConfigError "<file>: key '<key>': <message>".
  [[noreturn]] void fail(const char* key, const std::string& message) const;

 private:
  const nlohmann::json& json_;
  std::string file_;
};

/// A name prefix of a family's Hugging Face checkpoints and polyhal's
/// (BERT's) name for it: {"roberta.", "bert."}.
struct CheckpointPrefix {
  const char* checkpoint;
  const char* polyhal;
};

class ModelFamily {
 public:
  virtual ~ModelFamily() = default;
  virtual ModelType type() const = 0;
  /// config.json's "model_type" for this family.
  virtual const char* name() const = 0;
  /// How docs and messages name it ("GroupBERT").
  virtual const char* title() const = 0;
  virtual std::span<const FamilyPreset> presets() const = 0;
  /// The config.json keys only this family has (another family's config
  /// holding one is refused: it was meant for this family).
  virtual std::span<const char* const> own_keys() const = 0;
  /// A preset's settings beyond L, H and A (GroupBERT's LayerNorm eps).
  virtual void preset_defaults(BertConfig&) const {}
  /// A config.json key whose `true` selects this family without
  /// "model_type" (Graphcore's "groupbert": true), or nullptr.
  virtual const char* marker_key() const { return nullptr; }

  /// Reads this family's own keys (the shared BERT dimensions are read
  /// already; `json.has` tells what the file set).
  virtual void read_config(const ConfigJson& json, BertConfig& config) const = 0;
  /// Adds this family's own keys to a config.json being written.
  virtual void write_config(const BertConfig& config, nlohmann::json& json) const = 0;
  /// Throws ConfigError (prefixed by `where`) for inconsistent family keys.
  virtual void validate(const BertConfig& config, const std::string& where) const = 0;
  /// Why a sequence of `seq` tokens cannot run this model ("" when it can):
  /// the message names the family's key, and `source` (the file or preset
  /// the dimensions came from) when not empty.
  virtual std::string sequence_problem(const BertConfig& config, std::int64_t seq,
                                       const std::string& source) const = 0;

  /// Parameters of one encoder layer, and of what follows the last one.
  virtual std::int64_t layer_parameters(const BertConfig& config) const = 0;
  virtual std::int64_t final_parameters(const BertConfig& config) const = 0;
  /// One encoder layer's tensors under `prefix` ("bert.encoder.layer.3."),
  /// as the Hugging Face checkpoint names them.
  virtual void layer_tensor_shapes(const BertConfig& config, const std::string& prefix,
                                   std::vector<std::pair<std::string, Shape>>& shapes) const = 0;
  /// The tensors after the last layer (GroupBERT's final norm).
  virtual void final_tensor_shapes(const BertConfig& config,
                                   std::vector<std::pair<std::string, Shape>>& shapes) const = 0;
  /// BERT's name for `name` when it is one of this family's own checkpoint
  /// names, else nullopt (read: every family's are tried, none is another's).
  virtual std::optional<std::string> polyhal_name(const std::string&) const { return std::nullopt; }
  /// A checkpoint tensor of this family's that polyhal builds nothing for
  /// and leaves out (ELECTRA's discriminator head).
  virtual bool ignored_tensor(const std::string&) const { return false; }
  /// The checkpoint holds token type embeddings (DistilBERT's does not:
  /// polyhal reads every token as type 0 of a zero table, never written).
  virtual bool token_types() const { return true; }
  /// Buckets of the relative-position bias the attention adds to its scores
  /// (MPNet's table [buckets, heads], shared by the layers); 0: none.
  virtual std::int64_t relative_buckets() const { return 0; }
  /// The bucket of key j for query i, `relative` = j - i.
  virtual std::int32_t relative_bucket(std::int64_t) const { return 0; }
  /// The activation of the dense layer on the first token before the
  /// classifier (BERT's pooler: tanh; ELECTRA's head: GELU).
  virtual Activation pooler_activation() const { return Activation::tanh; }
  /// That dense layer and its activation are followed by a LayerNorm,
  /// bert.pooler.norm (ModernBertPredictionHead).
  virtual bool pooler_norm() const { return false; }
  /// Question answering runs that dense layer, activation (and norm) on
  /// every token, then `classifier` [2, H] to the start and end logits
  /// (ModernBertForQuestionAnswering), where BERT's qa_outputs reads the
  /// encoder's output itself.
  virtual bool qa_prediction_head() const { return false; }
  /// A tensor of polyhal's model (by polyhal's name) that this family's
  /// checkpoints do not hold for `config` (ModernBERT's biases when its
  /// config says none, its absent position table): read as zeros, never
  /// trained, never written.
  virtual bool zero_tensor(const BertConfig&, const std::string&) const { return false; }
  /// The classifier reads the mean of each sequence's tokens (ModernBERT's
  /// classifier_pooling "mean") instead of its first token.
  virtual bool mean_pooled_classifier(const BertConfig&) const { return false; }
  /// The checkpoint name of polyhal's tensor `name` in a model with `head`
  /// (written by exports, as transformers names it for this family).
  virtual std::string checkpoint_name(const std::string& name, const TaskHead&) const {
    return name;
  }
  /// transformers' class name for `head` ("BertForSequenceClassification").
  virtual std::string architecture(const TaskHead& head) const { return hf_architecture(head); }
  /// Why this family cannot compute `head` (`training`: fine-tune it), or "".
  virtual std::string task_problem(TaskHead::Kind, bool /*training*/) const { return {}; }
  /// The name (after the encoder prefix) of layer 0's FFN up-projection
  /// [intermediate_size, hidden_size], which checkpoint fitting compares.
  virtual const char* intermediate_weight() const = 0;

  /// Hidden-dropout masks one layer draws (each dropout is a random stream).
  virtual std::uint64_t hidden_dropouts_per_layer() const = 0;
  /// Declares encoder layer `layer` on input `x`; returns its output.
  virtual int encoder_layer(EncoderOps& ops, std::int64_t layer, int x) const = 0;
  /// What runs after the last layer, before the heads (identity for BERT).
  virtual int after_encoder(EncoderOps& ops, int x) const = 0;
};

/// Appends a layer's tensors under its prefix to a family's shape list: a
/// dense layer's weight [out, in] and bias [out], a norm's weight and bias.
class LayerTensorList {
 public:
  LayerTensorList(std::vector<std::pair<std::string, Shape>>& shapes, std::string prefix,
                  std::int64_t hidden)
      : shapes_(shapes), prefix_(std::move(prefix)), hidden_(hidden) {}
  void dense(const std::string& name, std::int64_t out, std::int64_t in) {
    shapes_.push_back({prefix_ + name + ".weight", {out, in}});
    shapes_.push_back({prefix_ + name + ".bias", {out}});
  }
  void norm(const std::string& name) {
    shapes_.push_back({prefix_ + name + ".weight", {hidden_}});
    shapes_.push_back({prefix_ + name + ".bias", {hidden_}});
  }

 private:
  std::vector<std::pair<std::string, Shape>>& shapes_;
  std::string prefix_;
  std::int64_t hidden_;
};

/// The registered families, in the order errors list them.
std::span<const ModelFamily* const> model_families();
/// The family of `type`.
const ModelFamily& model_family(ModelType type);
/// The family a config.json names (its "model_type", or a family's marker
/// key, else BERT, as Google's bert_config.json has neither).
const ModelFamily& family_of_config(const ConfigJson& json);

/// `name` with the first of `prefixes` it starts with replaced by polyhal's,
/// or nullopt when it starts with none.
std::optional<std::string> renamed_prefix(std::span<const CheckpointPrefix> prefixes,
                                          const std::string& name);

/// The prefix of encoder layer `layer`'s tensors.
std::string encoder_layer_prefix(std::int64_t layer);

}  // namespace polyhal::families
