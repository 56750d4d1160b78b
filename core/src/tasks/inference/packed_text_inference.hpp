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

/// A line's real tokens (no padding).
struct LineTokens {
  std::vector<std::int32_t> ids, types;
};
/// The real tokens of a tokenizer's (padded) encoding.
LineTokens line_tokens(const Encoding& encoding);

/// W x + b on the host in double sums, W [out, in] as Hugging Face's
/// nn.Linear stores it: the small heads of packed rows (a pooler, a
/// classifier, qa_outputs), computed from each sequence's own tokens.
std::vector<float> host_linear(std::span<const float> x, const HostTensor& weight,
                               const HostTensor& bias);

/// Called with each line's index and its last hidden state [tokens, H].
using PackedLineDone = std::function<void(std::size_t, std::span<const float>)>;

/// Runs `lines` through `bert` (prepared for packed rows, without heads),
/// several to a row, each attending only to itself; rows the lines leave
/// empty hold `filler` ([CLS] [SEP]). `done` gets every line once, batch by
/// batch. Adds computed tokens and batch times to `stats` when given.
/// `max_per_row` 1 is one line per row (the padded path, for comparison);
/// `packing` places the lines (text_packing.hpp).
void run_packed_lines(BertInference& bert, const std::vector<LineTokens>& lines,
                      const Encoding& filler, const PackedLineDone& done, InferenceResult* stats,
                      std::int64_t max_per_row, RowPacking packing);
/// The same with the lines in order (RowPacking::in_order).
void run_packed_lines(BertInference& bert, const std::vector<LineTokens>& lines,
                      const Encoding& filler, const PackedLineDone& done,
                      InferenceResult* stats = nullptr, std::int64_t max_per_row = 0);

/// Runs every line through `bert` (prepared for packed rows, without heads)
/// and fills result's timings and counts.
void infer_packed_text(BertInference& bert, const PackedTextJob& job, InferenceResult& result);

}  // namespace polyhal
