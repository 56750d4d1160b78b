#pragma once
// Texts packed several to a row and run through a BertInference prepared
// for packed rows, each attending only to itself (text_packing.hpp places
// them): what text inference and the served model both run.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "polyhal/app/bert_inference.hpp"
#include "polyhal/app/safetensors.hpp"
#include "polyhal/app/tokenizer.hpp"
#include "text/text_packing.hpp"

namespace polyhal {

/// What the rows of a packed run cost: tokens computed (padding included)
/// and each model call's seconds.
struct PackedRunStats {
  std::int64_t computed_tokens = 0;
  std::vector<double> batch_seconds;
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
                      const Encoding& filler, const PackedLineDone& done, PackedRunStats* stats,
                      std::int64_t max_per_row, RowPacking packing);
/// The same with the lines in order (RowPacking::in_order).
void run_packed_lines(BertInference& bert, const std::vector<LineTokens>& lines,
                      const Encoding& filler, const PackedLineDone& done,
                      PackedRunStats* stats = nullptr, std::int64_t max_per_row = 0);

}  // namespace polyhal
