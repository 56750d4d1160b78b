// MLPerf BERT HDF5 reader (mlperf_hdf5.hpp) on the shared row reader
// (data/hdf5_rows.hpp), which opens, checks and reads the files.
#include "polyhal/app/mlperf_hdf5.hpp"

#include <fmt/format.h>

#include <array>

#include "data/hdf5_rows.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

enum Dataset : std::size_t { ids, mask, segments, positions, labels, next_sentence };

std::vector<std::string> dataset_names() {
  return {"input_ids",           "input_mask",    "segment_ids",
          "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};
}

}  // namespace

struct MlperfHdf5Reader::Impl {
  explicit Impl(const std::filesystem::path& path)
      : rows(path, dataset_names(), "MLPerf BERT pre-training data") {
    const auto names = dataset_names();
    const std::array<std::pair<Dataset, Dataset>, 3> same{
        {{mask, ids}, {segments, ids}, {labels, positions}}};
    for (const auto& [d, like] : same) {
      if (rows.width(d) != rows.width(like))
        throw ConfigError(fmt::format("{}: dataset '{}' has {} columns, '{}' has {}",
                                      rows.files().front().string(), names[d], rows.width(d),
                                      names[like], rows.width(like)));
    }
    if (rows.width(ids) == 0 || rows.width(positions) == 0 || rows.width(next_sentence) != 0)
      throw ConfigError(
          fmt::format("{}: input_ids and masked_lm_positions must be [samples, columns] and "
                      "next_sentence_labels [samples]",
                      rows.files().front().string()));
  }
  detail::Hdf5Rows rows;
};

MlperfHdf5Reader::MlperfHdf5Reader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>(path)) {}

MlperfHdf5Reader::~MlperfHdf5Reader() = default;

std::int64_t MlperfHdf5Reader::size() const noexcept {
  return impl_->rows.size();
}
std::int64_t MlperfHdf5Reader::seq_len() const noexcept {
  return impl_->rows.width(ids);
}
std::int64_t MlperfHdf5Reader::max_predictions() const noexcept {
  return impl_->rows.width(positions);
}
const std::vector<std::filesystem::path>& MlperfHdf5Reader::files() const noexcept {
  return impl_->rows.files();
}

MlperfSample MlperfHdf5Reader::sample(std::int64_t index) const {
  const auto& rows = impl_->rows;
  const auto place = rows.place(index);
  MlperfSample s;
  s.file = place.file;
  s.row = place.row;
  const auto seq = static_cast<std::size_t>(seq_len());
  const auto predictions = static_cast<std::size_t>(max_predictions());
  s.input_ids.resize(seq), s.input_mask.resize(seq), s.segment_ids.resize(seq);
  s.masked_lm_positions.resize(predictions), s.masked_lm_ids.resize(predictions);
  rows.read(index, ids, s.input_ids.data());
  rows.read(index, mask, s.input_mask.data());
  rows.read(index, segments, s.segment_ids.data());
  rows.read(index, positions, s.masked_lm_positions.data());
  rows.read(index, labels, s.masked_lm_ids.data());
  rows.read(index, next_sentence, &s.next_sentence_label);
  return s;
}

}  // namespace polyhal
