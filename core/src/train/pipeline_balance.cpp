#include "train/pipeline_balance.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace polyhal {

StageCost layer_cost(const BertConfig& model, std::int64_t seq) {
  const auto h = static_cast<double>(model.hidden_size);
  const auto i = static_cast<double>(model.intermediate_size);
  const auto s = static_cast<double>(seq);
  // Q, K, V and output projections, the two FFN GEMMs, the two attention
  // GEMMs (scores and context); 2 FLOPs per multiply-add.
  const double flops = 8 * s * h * h + 4 * s * h * i + 4 * s * s * h;
  // Weights and biases of the projections and the FFN, two LayerNorms.
  const double parameters = 4 * h * h + 2 * h * i + 4 * h + i + h + 4 * h;
  return {flops, parameters};
}

StageCost embeddings_cost(const BertConfig& model, std::int64_t seq) {
  const auto h = static_cast<double>(model.hidden_size);
  const double rows =
      static_cast<double>(model.vocab_size + model.max_position_embeddings + model.type_vocab_size);
  // Three gathers and a LayerNorm: a few operations per element.
  return {10 * static_cast<double>(seq) * h, rows * h + 2 * h};
}

StageCost heads_cost(const BertConfig& model, std::int64_t seq, std::int64_t predictions) {
  const auto h = static_cast<double>(model.hidden_size);
  if (predictions == 0) {  // a fine-tuning head: the pooler and a few outputs per token
    return {2 * h * h + 4 * static_cast<double>(seq) * h, h * h + h + 2 * h + 2};
  }
  const auto v = static_cast<double>(model.vocab_size);
  const auto p = static_cast<double>(predictions);
  // MLM transform and decoder on the masked rows, pooler and NSP on [CLS].
  const double flops = 2 * p * h * h + 2 * p * h * v + 2 * h * h + 4 * h;
  // The decoder's copy of the word embeddings, its bias, the transform with
  // its LayerNorm, the pooler and the NSP classifier.
  const double parameters = v * h + v + h * h + 3 * h + h * h + h + 2 * h + 2;
  return {flops, parameters};
}

std::vector<std::int64_t> balance_pipeline(const BertConfig& model, std::int64_t stages,
                                           std::int64_t seq, std::int64_t predictions) {
  const std::int64_t layers = model.num_hidden_layers;
  const StageCost layer = layer_cost(model, seq), first = embeddings_cost(model, seq),
                  last = heads_cost(model, seq, predictions);
  const double total_flops = static_cast<double>(layers) * layer.flops + first.flops + last.flops;
  const double total_parameters =
      static_cast<double>(layers) * layer.parameters + first.parameters + last.parameters;
  const auto share = [&](std::int64_t stage, std::int64_t count) {
    StageCost cost{static_cast<double>(count) * layer.flops,
                   static_cast<double>(count) * layer.parameters};
    if (stage == 0) {
      cost.flops += first.flops;
      cost.parameters += first.parameters;
    }
    if (stage == stages - 1) {
      cost.flops += last.flops;
      cost.parameters += last.parameters;
    }
    return std::max(cost.flops / total_flops, cost.parameters / total_parameters);
  };
  // best[s][l]: placing the first l layers on stages 0..s-1, the smallest
  // largest share, then (among equal ones) the smallest sum of squared
  // shares, so that stages below the bottleneck are balanced too;
  // choice[s][l]: the layers of stage s-1 in that placement.
  struct Score {
    double worst = std::numeric_limits<double>::infinity(), squares = 0;
    bool better_than(const Score& other) const {
      if (worst < other.worst * (1 - 1e-9)) return true;
      return worst <= other.worst * (1 + 1e-9) && squares < other.squares * (1 - 1e-12);
    }
  };
  const auto n = static_cast<std::size_t>(layers);
  const auto k = static_cast<std::size_t>(stages);
  std::vector<std::vector<Score>> best(k + 1, std::vector<Score>(n + 1));
  std::vector<std::vector<std::int64_t>> choice(k + 1, std::vector<std::int64_t>(n + 1, 0));
  best[0][0] = {0, 0};
  for (std::size_t s = 1; s <= k; ++s) {
    for (std::size_t l = s; l <= n; ++l) {
      for (std::size_t count = 1; count <= l - (s - 1); ++count) {
        const Score& before = best[s - 1][l - count];
        if (std::isinf(before.worst)) continue;
        const double stage =
            share(static_cast<std::int64_t>(s - 1), static_cast<std::int64_t>(count));
        const Score candidate{std::max(before.worst, stage), before.squares + stage * stage};
        if (candidate.better_than(best[s][l])) {
          best[s][l] = candidate;
          choice[s][l] = static_cast<std::int64_t>(count);
        }
      }
    }
  }
  std::vector<std::int64_t> sizes(k);
  for (std::size_t s = k, l = n; s > 0; --s) {
    sizes[s - 1] = choice[s][l];
    l -= static_cast<std::size_t>(choice[s][l]);
  }
  return sizes;
}

}  // namespace polyhal
