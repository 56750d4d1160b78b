#pragma once
/// @file text_embedder.hpp
/// A text model held open for requests (`polyhal serve`): the tokenizer, the
/// sentence pooling and a BertInference on packed rows that the config of a
/// text-inference run names, so that texts of any mix of lengths share rows
/// and no compute goes to padding.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/app/config.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/run_plan.hpp"
#include "polyhal/device.hpp"

namespace polyhal {

class TextEmbedder {
 public:
  /// Opens the model `config` names (model.dir, or hf_config + weights +
  /// data.vocab; seeded weights without) on `device` for batches of
  /// batch.micro rows of model.seq_len tokens. Throws ConfigError naming the
  /// key when the config cannot serve embeddings (a task head, no pooling).
  TextEmbedder(Device& device, const RunConfig& config, const RunPlan& plan);
  ~TextEmbedder();
  TextEmbedder(const TextEmbedder&) = delete;
  TextEmbedder& operator=(const TextEmbedder&) = delete;

  struct Text {
    std::vector<std::int32_t> ids, types;  ///< [CLS] ... [SEP], at most max_tokens()
    bool truncated = false;                ///< the text had more tokens than that
  };
  /// A text's tokens as the model reads them. Safe from several threads.
  Text tokenize(const std::string& text) const;

  /// Each text's sentence embedding, pooled as the config and the model's
  /// sentence-transformers files say and not normalised (normalizes() says
  /// whether the model's own pipeline would), in order. One caller at a time.
  std::vector<std::vector<float>> embed(const std::vector<Text>& texts);

  std::int64_t dimensions() const noexcept;
  std::int64_t max_tokens() const noexcept;  ///< model.seq_len
  /// Tokens one model call holds: batch.micro x model.seq_len.
  std::int64_t tokens_per_call() const noexcept;
  const std::string& model_name() const noexcept;
  /// Whether the model L2-normalises its embeddings (a Normalize module in
  /// modules.json, or inference.normalize: true).
  bool normalizes() const noexcept;
  /// "mean pooling, L2-normalised (from DIR/modules.json)".
  const std::string& pooling_description() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polyhal
