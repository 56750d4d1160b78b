#pragma once
// `model.pipeline: N`: which encoder layers each of N stages takes, balanced
// by compute and by memory (docs/pretraining.md, Pipelining).
#include <cstdint>
#include <vector>

#include "polyhal/app/bert_config.hpp"

namespace polyhal {

/// What one stage of a pre-training pipeline costs, in any consistent unit.
struct StageCost {
  double flops = 0;       ///< forward FLOPs per sequence (backward is proportional)
  double parameters = 0;  ///< parameters held (weights, gradients and state scale with it)
};

/// Forward FLOPs and parameters per sequence of one encoder layer, of the
/// embeddings (first stage) and of the pre-training heads with the tied
/// decoder's copy of the word embeddings (last stage), at `seq` tokens and
/// `predictions` masked positions per sequence; `predictions` 0 is a
/// fine-tuning head (span or classification outputs, a pooler).
StageCost layer_cost(const BertConfig& model, std::int64_t seq);
StageCost embeddings_cost(const BertConfig& model, std::int64_t seq);
StageCost heads_cost(const BertConfig& model, std::int64_t seq, std::int64_t predictions);

/// Layers per stage (each at least one, summing to the model's layers) that
/// minimise the largest stage share, a stage's share being the larger of
/// its share of all FLOPs (the slowest stage sets the pipeline's pace) and
/// of all parameters (each stage is one device's memory); among partitions
/// with the same largest share, the one whose shares are most even (least
/// sum of squares). Deterministic.
std::vector<std::int64_t> balance_pipeline(const BertConfig& model, std::int64_t stages,
                                           std::int64_t seq, std::int64_t predictions);

}  // namespace polyhal
