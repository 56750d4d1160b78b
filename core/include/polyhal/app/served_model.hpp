#pragma once
/// @file served_model.hpp
/// A text model held open for requests (`polyhal serve`): the tokenizer and
/// a BertInference on packed rows that the config of a text-inference run
/// names, so that texts of any mix of lengths share rows and no compute goes
/// to padding. The encoder runs on the device; what sits on it is small and
/// runs per text on the host from that text's own tokens (a packed row's
/// first token is another text's [CLS]):
///  - embeddings: the sentence pooling the config and the model's
///    sentence-transformers files say;
///  - classification (a *ForSequenceClassification export, or model.head:
///    classification): the pooler and the classifier, labels from config.json;
///  - question answering (model.head: question_answering): qa_outputs'
///    start and end logits of every token;
///  - sparse embeddings (inference.pooling: splade): the MLM head on every
///    token, max-pooled as SPLADE does.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "polyhal/app/config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

/// The inference.* settings a served model reads (the inference task's
/// section gives them: inference_task.hpp served_text_options).
struct ServedTextOptions {
  std::string pooling = "auto";    ///< inference.pooling
  std::string normalize = "auto";  ///< inference.normalize
  bool packed = true;              ///< inference.packed
};

class ServedModel {
 public:
  /// sparse_embeddings: a *ForMaskedLM model served with inference.pooling
  /// splade (SPLADE's vocabulary weights, splade_head.hpp).
  enum class Task : std::uint8_t {
    embeddings,
    classification,
    question_answering,
    sparse_embeddings
  };

  /// Opens the model `plan`'s card names (model.dir, or hf_config + weights
  /// + data.vocab; seeded weights without) on `device` for batches of
  /// batch.micro rows of model.seq_len tokens; model.head chooses the task.
  /// Throws ConfigError naming the key when the config cannot serve (the
  /// MLM/NSP heads, embeddings without pooling).
  ServedModel(Device& device, const RunConfig& config, const RunPlan& plan,
              const ServedTextOptions& options);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  struct Text {
    std::vector<std::int32_t> ids, types;  ///< [CLS] a [SEP] (b [SEP]), at most max_tokens()
    bool truncated = false;                ///< the text had more tokens than that
  };
  /// A text's tokens as the model reads them; with `second`, the pair
  /// (query and passage, premise and hypothesis) as BERT reads two
  /// sentences, the longer cut first. Safe from several threads.
  Text tokenize(const std::string& text,
                const std::optional<std::string>& second = std::nullopt) const;
  /// One text's tokens cut at its start when too long: its last tokens
  /// kept (TEI's truncation_direction "Left"). Safe from several threads.
  Text tokenize_keeping_end(const std::string& text) const;
  /// A text's ids without special tokens: tokenized once, then framed with
  /// each partner (a /rerank query against every text). Safe from several threads.
  std::vector<std::int32_t> text_ids(const std::string& text) const;
  /// Ids of text_ids framed as tokenize() frames the texts.
  Text frame(std::vector<std::int32_t> a,
             std::optional<std::vector<std::int32_t>> b = std::nullopt) const;

  /// What run() returns per text.
  enum class Output : std::uint8_t {
    head,    ///< the task's output (below)
    tokens,  ///< the encoder's last hidden state: tokens x hidden, row-major
  };
  /// Each text's output, in order. Output::head: embeddings: its sentence
  /// embedding, pooled and not normalised (normalizes() says whether the
  /// model's own pipeline would); classification: its num_labels logits;
  /// question answering: its start logits then its end logits, one per
  /// token; sparse embeddings: one weight per vocabulary entry. Output::tokens: every token's
  /// vector, special tokens included (TEI's /embed_all). One caller at a time.
  std::vector<std::vector<float>> run(const std::vector<Text>& texts, Output output = Output::head);

  Task task() const noexcept;
  /// Embedding size (embeddings), labels (classification), the vocabulary
  /// (sparse embeddings), or 2.
  std::int64_t dimensions() const noexcept;
  std::int64_t max_tokens() const noexcept;  ///< model.seq_len
  /// Tokens one model call holds: batch.micro x model.seq_len.
  std::int64_t tokens_per_call() const noexcept;
  const std::string& model_name() const noexcept;
  /// Whether the model L2-normalises its embeddings (a Normalize module in
  /// modules.json, or inference.normalize: true).
  bool normalizes() const noexcept;
  /// Classification: the label names (config.json's id2label, else LABEL_i).
  const std::vector<std::string>& labels() const noexcept;
  /// Classification: labels scored each on its own (sigmoid) rather than
  /// as one choice (softmax); true for a single-logit model (a cross-encoder).
  bool independent_labels() const noexcept;
  /// "embeddings: mean pooling, L2-normalised (from DIR/modules.json)",
  /// "classification: 3 labels (negative, neutral, positive)", ...
  const std::string& description() const noexcept;
  const Tokenizer& tokenizer() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polyhal
