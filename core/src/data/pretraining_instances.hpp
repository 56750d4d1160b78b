#pragma once
// Training instances from tokenized documents, with the semantics of BERT's
// reference create_pretraining_data.py: segments filled to a target length
// (shorter with probability short_seq_prob), a random next segment half of
// the time (the unused segments put back), the longer side truncated from
// a random end, then 80/10/10 masking up to max_predictions, optionally of
// whole words. Draws come from DataRandom, not Python's `random`: the same
// rules and statistics, not the reference's exact instances.
#include <cstdint>
#include <vector>

namespace polyhal::detail {

/// A seeded 64-bit random stream (splitmix64), the same on every platform
/// and standard library, with the draws the reference makes.
class DataRandom {
 public:
  DataRandom(std::uint64_t seed, std::uint64_t stream) noexcept;
  std::uint64_t next() noexcept;
  /// Uniform in [0, 1), like random.random().
  double real() noexcept;
  /// Uniform in [low, high], both included, like random.randint().
  std::int64_t integer(std::int64_t low, std::int64_t high) noexcept;
  /// Fisher-Yates, like random.shuffle().
  template <class T>
  void shuffle(std::vector<T>& values) noexcept {
    for (std::size_t i = values.size(); i > 1; --i) {
      const auto j = static_cast<std::size_t>(integer(0, static_cast<std::int64_t>(i) - 1));
      std::swap(values[i - 1], values[j]);
    }
  }

 private:
  std::uint64_t state_;
};

/// A sentence's token ids; a document's sentences in order.
using Sentence = std::vector<std::int32_t>;
using Document = std::vector<Sentence>;

struct InstanceSettings {
  std::int64_t max_seq_len = 128;
  std::int64_t max_predictions = 20;
  double masked_lm_prob = 0.15;
  double short_seq_prob = 0.1;
  bool whole_word_masking = false;
  std::int32_t cls = 0, sep = 0, mask = 0;
  std::int32_t vocab_size = 0;
  /// Per token id: a "##" continuation piece (whole-word masking joins it
  /// to the word before).
  std::vector<bool> continuation;
};

/// [CLS] A [SEP] B [SEP], masked, with its labels.
struct Instance {
  std::vector<std::int32_t> tokens;
  std::int64_t segment_a = 0;  ///< tokens with segment id 0: [CLS] A [SEP]
  std::vector<std::int32_t> masked_positions, masked_labels;  ///< ascending positions
  bool random_next = false;
};

/// The instances of one shard: its documents shuffled, `dupe_factor`
/// passes over them (a random next segment drawn from the shard's own
/// documents), then all of them shuffled. `documents` must not be empty
/// and hold no empty document.
std::vector<Instance> create_instances(std::vector<Document> documents, std::int64_t dupe_factor,
                                       const InstanceSettings& settings, DataRandom& rng);

/// One document's instances (the reference's create_instances_from_document).
std::vector<Instance> instances_from_document(const std::vector<Document>& documents,
                                              std::size_t index, const InstanceSettings& settings,
                                              DataRandom& rng);

/// The reference's create_masked_lm_predictions on `instance` in place.
void mask_instance(Instance& instance, const InstanceSettings& settings, DataRandom& rng);

}  // namespace polyhal::detail
