#include "data/pretraining_instances.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace polyhal::detail {

DataRandom::DataRandom(std::uint64_t seed, std::uint64_t stream) noexcept
    : state_(seed * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xD1B54A32D192ED03ull) {}

std::uint64_t DataRandom::next() noexcept {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double DataRandom::real() noexcept {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

std::int64_t DataRandom::integer(std::int64_t low, std::int64_t high) noexcept {
  const auto span = static_cast<std::uint64_t>(high - low) + 1;
  // Rejection keeps every value equally likely.
  const std::uint64_t limit = span == 0 ? 0 : UINT64_MAX - UINT64_MAX % span;
  std::uint64_t draw = next();
  while (span != 0 && draw >= limit) draw = next();
  return low + static_cast<std::int64_t>(span == 0 ? draw : draw % span);
}

namespace {

/// The reference's truncate_seq_pair: the longer side (B on a tie) loses a
/// token from its front or its back, at random, until both fit.
void truncate_pair(std::vector<std::int32_t>& a, std::vector<std::int32_t>& b,
                   std::int64_t max_tokens, DataRandom& rng) {
  // The same draws as the reference's loop, but the tokens kept are cut out
  // once at the end: erasing the front token by token is quadratic in a
  // long line's length (a 4 MB line took 17 s).
  struct Side {
    std::vector<std::int32_t>& tokens;
    std::size_t front = 0, size = 0;
  };
  Side first{a, 0, a.size()}, second{b, 0, b.size()};
  while (static_cast<std::int64_t>(first.size + second.size) > max_tokens) {
    Side& longer = first.size > second.size ? first : second;
    if (rng.real() < 0.5) ++longer.front;
    --longer.size;
  }
  for (Side* side : {&first, &second}) {
    auto& tokens = side->tokens;
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(side->front);
    tokens.erase(begin + static_cast<std::ptrdiff_t>(side->size), tokens.end());
    tokens.erase(tokens.begin(), begin);
  }
}

}  // namespace

void mask_instance(Instance& instance, const InstanceSettings& s, DataRandom& rng) {
  const auto& tokens = instance.tokens;
  std::vector<std::vector<std::int64_t>> candidates;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == s.cls || tokens[i] == s.sep) continue;
    const auto id = static_cast<std::size_t>(tokens[i]);
    if (s.whole_word_masking && !candidates.empty() && id < s.continuation.size() &&
        s.continuation[id]) {
      candidates.back().push_back(static_cast<std::int64_t>(i));
    } else {
      candidates.push_back({static_cast<std::int64_t>(i)});
    }
  }
  rng.shuffle(candidates);
  // Python's round() rounds halves to even, as nearbyint does.
  const auto wanted = std::min<std::int64_t>(
      s.max_predictions,
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::nearbyint(
                                    static_cast<double>(tokens.size()) * s.masked_lm_prob))));
  std::vector<std::int32_t> output = tokens;
  std::vector<std::pair<std::int64_t, std::int32_t>> masked;  // (position, label)
  std::set<std::int64_t> covered;
  for (const auto& word : candidates) {
    if (static_cast<std::int64_t>(masked.size()) >= wanted) break;
    if (static_cast<std::int64_t>(masked.size() + word.size()) > wanted) continue;
    if (std::any_of(word.begin(), word.end(), [&](std::int64_t i) { return covered.contains(i); }))
      continue;
    for (const std::int64_t i : word) {
      covered.insert(i);
      const auto at = static_cast<std::size_t>(i);
      std::int32_t replacement = s.mask;  // 80%: [MASK]
      if (rng.real() >= 0.8) {
        // 10% the token itself, 10% a random one of the vocabulary.
        replacement = rng.real() < 0.5
                          ? tokens[at]
                          : static_cast<std::int32_t>(rng.integer(0, s.vocab_size - 1));
      }
      output[at] = replacement;
      masked.emplace_back(i, tokens[at]);
    }
  }
  std::sort(masked.begin(), masked.end());
  instance.tokens = std::move(output);
  instance.masked_positions.clear();
  instance.masked_labels.clear();
  for (const auto& [position, label] : masked) {
    instance.masked_positions.push_back(static_cast<std::int32_t>(position));
    instance.masked_labels.push_back(label);
  }
}

std::vector<Instance> instances_from_document(const std::vector<Document>& documents,
                                              std::size_t index, const InstanceSettings& s,
                                              DataRandom& rng) {
  const Document& document = documents[index];
  const std::int64_t max_tokens = s.max_seq_len - 3;  // [CLS], [SEP], [SEP]
  // Mostly full sequences; sometimes short ones, so fine-tuning's short
  // inputs are not unseen.
  std::int64_t target = max_tokens;
  if (rng.real() < s.short_seq_prob) target = rng.integer(2, max_tokens);
  std::vector<Instance> out;
  std::vector<const Sentence*> chunk;
  std::int64_t length = 0;
  for (std::size_t i = 0; i < document.size(); ++i) {
    chunk.push_back(&document[i]);
    length += static_cast<std::int64_t>(document[i].size());
    if (i + 1 != document.size() && length < target) continue;
    // A: the chunk's first a_end segments.
    std::size_t a_end = 1;
    if (chunk.size() >= 2)
      a_end = static_cast<std::size_t>(rng.integer(1, static_cast<std::int64_t>(chunk.size()) - 1));
    std::vector<std::int32_t> a, b;
    for (std::size_t j = 0; j < a_end; ++j) a.insert(a.end(), chunk[j]->begin(), chunk[j]->end());
    Instance instance;
    if (chunk.size() == 1 || rng.real() < 0.5) {
      instance.random_next = true;
      const std::int64_t target_b = target - static_cast<std::int64_t>(a.size());
      // Another document's segments (the same one only after ten tries).
      std::size_t other = index;
      for (int attempt = 0; attempt < 10 && other == index; ++attempt)
        other = static_cast<std::size_t>(
            rng.integer(0, static_cast<std::int64_t>(documents.size()) - 1));
      const Document& random_document = documents[other];
      const auto start = static_cast<std::size_t>(
          rng.integer(0, static_cast<std::int64_t>(random_document.size()) - 1));
      for (std::size_t j = start; j < random_document.size(); ++j) {
        b.insert(b.end(), random_document[j].begin(), random_document[j].end());
        if (static_cast<std::int64_t>(b.size()) >= target_b) break;
      }
      // The chunk's segments B did not use go back for the next instance.
      i -= chunk.size() - a_end;
    } else {
      for (std::size_t j = a_end; j < chunk.size(); ++j)
        b.insert(b.end(), chunk[j]->begin(), chunk[j]->end());
    }
    truncate_pair(a, b, max_tokens, rng);
    instance.tokens.reserve(a.size() + b.size() + 3);
    instance.tokens.push_back(s.cls);
    instance.tokens.insert(instance.tokens.end(), a.begin(), a.end());
    instance.tokens.push_back(s.sep);
    instance.segment_a = static_cast<std::int64_t>(instance.tokens.size());
    instance.tokens.insert(instance.tokens.end(), b.begin(), b.end());
    instance.tokens.push_back(s.sep);
    mask_instance(instance, s, rng);
    out.push_back(std::move(instance));
    chunk.clear();
    length = 0;
  }
  return out;
}

std::vector<Instance> create_instances(std::vector<Document> documents, std::int64_t dupe_factor,
                                       const InstanceSettings& settings, DataRandom& rng) {
  rng.shuffle(documents);
  std::vector<Instance> instances;
  for (std::int64_t pass = 0; pass < dupe_factor; ++pass) {
    for (std::size_t d = 0; d < documents.size(); ++d) {
      auto more = instances_from_document(documents, d, settings, rng);
      std::move(more.begin(), more.end(), std::back_inserter(instances));
    }
  }
  rng.shuffle(instances);
  return instances;
}

}  // namespace polyhal::detail
