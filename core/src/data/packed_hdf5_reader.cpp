// Packed pre-training data (packed_data.hpp) on the shared row reader,
// every row checked before use: it is input from a file.
#include <fmt/format.h>

#include "data/hdf5_rows.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

enum Dataset : std::size_t {
  ids,
  segments,
  mask,
  positions,
  lm_positions,
  lm_ids,
  lm_weights,
  ns_positions,
  ns_labels,
  ns_weights
};

std::vector<std::string> dataset_names() {
  return {"packed_input_ids",
          "packed_segment_ids",
          "packed_input_mask",
          "packed_position_ids",
          "packed_masked_lm_positions",
          "packed_masked_lm_ids",
          "packed_masked_lm_weights",
          "packed_next_sentence_positions",
          "packed_next_sentence_labels",
          "packed_next_sentence_weights"};
}

}  // namespace

void check_packed_row(const PackedSample& s) {
  const auto fail = [&](Dataset d, const std::string& problem) {
    throw ConfigError(fmt::format("{}: sample {}: field {}: {}", s.file.string(), s.row,
                                  dataset_names()[d], problem));
  };
  const auto k = static_cast<std::int32_t>(s.next_sentence_positions.size());
  std::vector<std::int32_t> starts;  // of sequences 1, 2, ...
  std::int32_t current = 0;
  for (std::size_t t = 0; t < s.input_mask.size(); ++t) {
    const std::int32_t m = s.input_mask[t];
    if (m < 0 || m > k)
      fail(mask, fmt::format("{} at token {}: outside 0..{} (sequences per row)", m, t, k));
    if (m != 0 && m != current) {
      if (m != current + 1 || current < 0)
        fail(mask, fmt::format("sequence {} at token {} after sequence {}: sequences must be "
                               "contiguous and numbered 1, 2, ... in order",
                               m, t, current < 0 ? 0 : current));
      starts.push_back(static_cast<std::int32_t>(t));
      current = m;
    } else if (m == 0 && current > 0) {
      current = -1;  // padding: only padding may follow
    } else if (m == 0 && current == 0 && t == 0) {
      fail(mask, "the row starts with padding");
    }
    if (m != 0) {
      const std::int32_t expected = static_cast<std::int32_t>(t) - starts.back();
      if (s.position_ids[t] != expected)
        throw ConfigError(fmt::format(
            "{}: sample {}: field packed_position_ids: {} at token {}, but packed_input_mask "
            "puts that token at position {} of sequence {}",
            s.file.string(), s.row, s.position_ids[t], t, expected, m));
    }
  }
  const auto sequences = static_cast<std::int64_t>(starts.size());
  for (std::int32_t q = 0; q < k; ++q) {
    const float w = s.next_sentence_weights[static_cast<std::size_t>(q)];
    if (w != 0.0f && w != 1.0f)
      fail(ns_weights, fmt::format("{} for sequence {}: expected 0 or 1", w, q + 1));
    if ((w == 1.0f) != (q < sequences))
      fail(ns_weights, fmt::format("the row holds {} sequences; weight {} for sequence {}",
                                   sequences, w, q + 1));
    if (w == 1.0f) {
      if (s.next_sentence_positions[static_cast<std::size_t>(q)] !=
          starts[static_cast<std::size_t>(q)])
        fail(ns_positions, fmt::format("{} for sequence {}, which starts at {}",
                                       s.next_sentence_positions[static_cast<std::size_t>(q)],
                                       q + 1, starts[static_cast<std::size_t>(q)]));
      const std::int32_t label = s.next_sentence_labels[static_cast<std::size_t>(q)];
      if (label != 0 && label != 1)
        fail(ns_labels, fmt::format("{} for sequence {}: expected 0 or 1", label, q + 1));
    }
  }
  for (std::size_t p = 0; p < s.masked_lm_positions.size(); ++p) {
    const float w = s.masked_lm_weights[p];
    if (w != 0.0f && w != 1.0f) fail(lm_weights, fmt::format("{} at {}: expected 0 or 1", w, p));
    if (w == 0.0f) continue;
    const std::int32_t at = s.masked_lm_positions[p];
    if (at < 0 || at >= static_cast<std::int32_t>(s.input_mask.size()) ||
        s.input_mask[static_cast<std::size_t>(at)] == 0)
      fail(lm_positions, fmt::format("{} at {}: not a token of any sequence", at, p));
  }
}

std::int64_t PackedSample::sequences() const {
  std::int64_t count = 0;
  for (const float w : next_sentence_weights) count += w == 1.0f ? 1 : 0;
  return count;
}

struct PackedHdf5Reader::Impl {
  explicit Impl(const std::filesystem::path& path)
      : rows(path, dataset_names(), "packed BERT pre-training data") {
    const auto names = dataset_names();
    const auto require = [&](Dataset d, Dataset like) {
      if (rows.width(d) != rows.width(like) || rows.width(d) == 0)
        throw ConfigError(fmt::format("{}: dataset '{}' has {} columns, '{}' has {}",
                                      rows.files().front().string(), names[d], rows.width(d),
                                      names[like], rows.width(like)));
    };
    for (Dataset d : {segments, mask, positions}) require(d, ids);
    for (Dataset d : {lm_ids, lm_weights}) require(d, lm_positions);
    for (Dataset d : {ns_labels, ns_weights}) require(d, ns_positions);
    require(ids, ids);
    require(lm_positions, lm_positions);
    require(ns_positions, ns_positions);
  }
  detail::Hdf5Rows rows;
};

PackedHdf5Reader::PackedHdf5Reader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>(path)) {}
PackedHdf5Reader::~PackedHdf5Reader() = default;

std::int64_t PackedHdf5Reader::size() const noexcept {
  return impl_->rows.size();
}
std::int64_t PackedHdf5Reader::seq_len() const noexcept {
  return impl_->rows.width(ids);
}
std::int64_t PackedHdf5Reader::max_predictions() const noexcept {
  return impl_->rows.width(lm_positions);
}
std::int64_t PackedHdf5Reader::max_sequences() const noexcept {
  return impl_->rows.width(ns_positions);
}

PackedSample PackedHdf5Reader::sample(std::int64_t index) const {
  const auto& rows = impl_->rows;
  const auto place = rows.place(index);
  PackedSample s;
  s.file = place.file;
  s.row = place.row;
  const auto seq = static_cast<std::size_t>(seq_len());
  const auto p = static_cast<std::size_t>(max_predictions());
  const auto k = static_cast<std::size_t>(max_sequences());
  s.input_ids.resize(seq), s.segment_ids.resize(seq), s.input_mask.resize(seq),
      s.position_ids.resize(seq);
  s.masked_lm_positions.resize(p), s.masked_lm_ids.resize(p), s.masked_lm_weights.resize(p);
  s.next_sentence_positions.resize(k), s.next_sentence_labels.resize(k),
      s.next_sentence_weights.resize(k);
  rows.read(index, ids, s.input_ids.data());
  rows.read(index, segments, s.segment_ids.data());
  rows.read(index, mask, s.input_mask.data());
  rows.read(index, positions, s.position_ids.data());
  rows.read(index, lm_positions, s.masked_lm_positions.data());
  rows.read(index, lm_ids, s.masked_lm_ids.data());
  rows.read(index, lm_weights, s.masked_lm_weights.data());
  rows.read(index, ns_positions, s.next_sentence_positions.data());
  rows.read(index, ns_labels, s.next_sentence_labels.data());
  rows.read(index, ns_weights, s.next_sentence_weights.data());
  check_packed_row(s);
  return s;
}

bool is_packed_data(const std::filesystem::path& path) {
  return detail::hdf5_has_dataset(path, "packed_input_ids");
}

}  // namespace polyhal
