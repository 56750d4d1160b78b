#pragma once
// Text inference without a task head on packed rows (text_packing.hpp):
// the embeddings, pooled outputs and hidden states of each line as the
// padded path computes them, with no compute on padding.
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/inference_task.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "text/packed_lines.hpp"
#include "text/sentence_pooling.hpp"
#include "text/text_packing.hpp"

namespace polyhal {

/// One line of text: sentence A, and B of a pair.
struct TextLine {
  std::string a;
  std::optional<std::string> b;
};

/// What packed text inference writes per line and with what.
struct PackedTextJob {
  const std::vector<TextLine>* lines = nullptr;
  const Tokenizer* tokenizer = nullptr;
  SentencePooling pooling;
  bool hidden_states = false;
  /// The pooler's weights (Hugging Face names), or null when the model has
  /// none: each line's pooled output is computed on the host from its own
  /// [CLS] (the device's pooler reads each row's first token only).
  const HostTensor* pooler_weight = nullptr;
  const HostTensor* pooler_bias = nullptr;
  /// Receives each line's JSON text, in file order.
  std::function<void(const std::string&)> write;
};

/// Runs every line through `bert` (prepared for packed rows, without heads)
/// and fills result's timings and counts.
void infer_packed_text(BertInference& bert, const PackedTextJob& job, InferenceResult& result);

}  // namespace polyhal
