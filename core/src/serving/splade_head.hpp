#pragma once
// SPLADE's sparse embedding (text-embeddings-inference's /embed_sparse,
// sentence-transformers' SpladePooling): a *ForMaskedLM model's MLM head
// on every token, then the max over the text's tokens (special ones
// included) of log(1 + relu(logit)) per vocabulary entry. Computed on the
// host from a text's own tokens of a packed row, as the other served heads.
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "polyhal/app/safetensors.hpp"

namespace polyhal {

class SpladeHead {
 public:
  /// The MLM head's transform (dense, GELU, LayerNorm with `layer_norm_eps`)
  /// and bias out of `head_tensors` (load_bert_encoder_weights' head tensors),
  /// and its decoder, tied to `word_embeddings` [vocab, hidden] (copied).
  /// Throws ConfigError naming `source` when the model has no MLM head.
  SpladeHead(TensorMap& head_tensors, const HostTensor& word_embeddings, double layer_norm_eps,
             const std::filesystem::path& source);

  /// One text's weights, one per vocabulary entry (most are 0), from its
  /// hidden states [tokens, hidden].
  std::vector<float> weights(std::span<const float> hidden, std::size_t tokens) const;
  std::int64_t vocab_size() const noexcept;

 private:
  HostTensor dense_weight_, dense_bias_, gamma_, beta_, decoder_, decoder_bias_;
  double eps_;
};

}  // namespace polyhal
