// Generated pre-training data (data.source: generated | pattern): BERT-shaped
// micro-batches that are a pure function of (data.seed, index), for
// benchmarks and tests without a corpus.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "polyhal/app/pretraining_data.hpp"

namespace polyhal {
namespace {

struct SpecialTokens {
  std::int32_t pad, cls, sep, mask, first_word;
};

/// BERT's uncased vocabulary ids when the vocabulary is that large; a small
/// test vocabulary keeps its specials at 0-4.
SpecialTokens special_tokens(std::int64_t vocab) {
  if (vocab > 1000) return {0, 101, 102, 103, 999};
  return {0, 2, 3, 4, 5};
}

}  // namespace

std::int64_t smallest_generated_vocabulary() noexcept {
  return special_tokens(0).first_word + 1;
}

TrainingBatch make_pretraining_batch(const BertConfig& config, BertShape shape,
                                     const DataSection& data, std::uint64_t index) {
  std::mt19937_64 rng(data.seed * 0x9e3779b97f4a7c15ull + index + 1);
  const auto special = special_tokens(config.vocab_size);
  const std::int64_t words = config.vocab_size - special.first_word;
  std::uniform_int_distribution<std::int64_t> any_word(0, words - 1);
  std::uniform_real_distribution<double> coin(0.0, 1.0);
  TrainingBatch batch;
  batch.index = index;

  const std::int64_t s = shape.seq;
  const std::int64_t a_len = (s - 3) / 2, b_len = s - 3 - a_len;
  for (std::int64_t b = 0; b < shape.batch; ++b) {
    const bool random_next = coin(rng) < 0.5;
    batch.nsp_labels.push_back(random_next ? 1 : 0);
    const std::int64_t start = any_word(rng);
    std::int64_t b_start = random_next ? any_word(rng) : start;
    if (random_next && b_start == start) b_start = (start + 1) % words;
    auto word = [&](std::int64_t base, std::int64_t k) {
      // "pattern": each segment repeats one word, so a masked token is a copy
      // of its neighbours and "is next" means B repeats A's word.
      const std::int64_t offset =
          data.source == "pattern" ? base % words : (static_cast<void>(k), any_word(rng));
      return static_cast<std::int32_t>(special.first_word + offset);
    };
    std::vector<std::int32_t> ids{special.cls};
    std::vector<std::int32_t> types{0};
    for (std::int64_t k = 0; k < a_len; ++k) ids.push_back(word(start, k)), types.push_back(0);
    ids.push_back(special.sep), types.push_back(0);
    for (std::int64_t k = 0; k < b_len; ++k) ids.push_back(word(b_start, k)), types.push_back(1);
    ids.push_back(special.sep), types.push_back(1);
    // Masking as BERT's create_pretraining_data: choose positions among the
    // words, at most max_predictions; 80% [MASK], 10% random word, 10% kept.
    std::vector<std::int64_t> candidates;
    for (std::int64_t p = 0; p < s; ++p) {
      if (ids[static_cast<std::size_t>(p)] != special.cls &&
          ids[static_cast<std::size_t>(p)] != special.sep) {
        candidates.push_back(p);
      }
    }
    std::shuffle(candidates.begin(), candidates.end(), rng);
    const auto count = std::min<std::int64_t>(
        data.max_predictions,
        std::max<std::int64_t>(
            1, std::llround(static_cast<double>(candidates.size()) * data.mask_probability)));
    std::vector<std::int32_t> labels(static_cast<std::size_t>(s), -100);
    for (std::int64_t c = 0; c < count; ++c) {
      const auto p = static_cast<std::size_t>(candidates[static_cast<std::size_t>(c)]);
      labels[p] = ids[p];
      const double r = coin(rng);
      if (r < 0.8) {
        ids[p] = special.mask;
      } else if (r < 0.9) {
        ids[p] = static_cast<std::int32_t>(special.first_word + any_word(rng));
      }
    }
    batch.inputs.input_ids.insert(batch.inputs.input_ids.end(), ids.begin(), ids.end());
    batch.inputs.token_type_ids.insert(batch.inputs.token_type_ids.end(), types.begin(),
                                       types.end());
    batch.inputs.attention_mask.insert(batch.inputs.attention_mask.end(),
                                       static_cast<std::size_t>(s), 1);
    batch.mlm_labels.insert(batch.mlm_labels.end(), labels.begin(), labels.end());
  }
  return batch;
}

}  // namespace polyhal
