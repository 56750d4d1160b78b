#include "data/packed_pretraining_data.hpp"

#include <fmt/format.h>

#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// Packed rows: polyhal's packed HDF5 (PackedHdf5Reader) or a packed
/// TFRecord layout (TfRecordPackedReader).
template <class Reader>
class PackedData final : public PretrainingData {
 public:
  PackedData(std::unique_ptr<Reader> reader, std::string format, const DataSource& config,
             const BertConfig& model, BertShape shape, SampleOrder order)
      : reader_(std::move(reader)),
        format_(std::move(format)),
        vocab_(model.vocab_size),
        positions_(model.max_position_embeddings),
        shape_(shape),
        order_(std::move(order)) {
    if (reader_->seq_len() != shape.seq) {
      throw config.error(config.data.key("files"),
                         fmt::format("{} holds packed rows of {} tokens, but model.seq_len is {}",
                                     config.data.files.string(), reader_->seq_len(), shape.seq));
    }
    // Up to 1024 rows spread over the files: the packer writes its kinds of
    // rows in runs (full single sequences first), so the first rows would not do.
    const std::int64_t rows = std::min<std::int64_t>(reader_->size(), 1024);
    std::int64_t sequences = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      sequences += reader_->sample(r * reader_->size() / rows).sequences();
    per_row_ = rows > 0 ? static_cast<double>(sequences) / static_cast<double>(rows) : 1.0;
  }

  TrainingBatch batch(std::uint64_t index) const override {
    TrainingBatch out;
    out.index = index;
    const auto seq = static_cast<std::size_t>(shape_.seq);
    for (std::int64_t b = 0; b < shape_.batch; ++b) {
      const auto position =
          index * static_cast<std::uint64_t>(shape_.batch) + static_cast<std::uint64_t>(b);
      const PackedSample s = reader_->sample(order_.row_at(position));
      const auto where = [&] { return fmt::format("{}: sample {}", s.file.string(), s.row); };
      for (const std::int32_t id : s.input_ids) {
        if (id < 0 || id >= vocab_)
          throw ConfigError(fmt::format(
              "{}: field packed_input_ids: token id {} outside the model's vocabulary of {}",
              where(), id, vocab_));
      }
      for (const std::int32_t p : s.position_ids) {
        if (p >= positions_)
          throw ConfigError(fmt::format(
              "{}: field packed_position_ids: {} beyond the model's {} position embeddings",
              where(), p, positions_));
      }
      const auto row = static_cast<std::int32_t>(b) * static_cast<std::int32_t>(seq);
      std::vector<std::int32_t> labels(seq, -100);
      for (std::size_t k = 0; k < s.masked_lm_positions.size(); ++k) {
        if (s.masked_lm_weights[k] == 0.0f) continue;  // checked: inside a sequence
        const std::int32_t label = s.masked_lm_ids[k];
        if (label < 0 || label >= vocab_)  // a crafted file: never an index out of the logits
          throw ConfigError(fmt::format(
              "{}: field packed_masked_lm_ids: {} at {} outside the model's vocabulary of {}",
              where(), label, k, vocab_));
        labels[static_cast<std::size_t>(s.masked_lm_positions[k])] = label;
      }
      auto append = [](auto& to, const auto& from) {
        to.insert(to.end(), from.begin(), from.end());
      };
      append(out.inputs.input_ids, s.input_ids);
      append(out.inputs.token_type_ids, s.segment_ids);
      append(out.inputs.attention_mask, s.input_mask);
      append(out.inputs.position_ids, s.position_ids);
      append(out.mlm_labels, labels);
      for (std::size_t q = 0; q < s.next_sentence_positions.size(); ++q) {
        const bool real = s.next_sentence_weights[q] == 1.0f;
        out.nsp_positions.push_back(row + (real ? s.next_sentence_positions[q] : 0));
        out.nsp_labels.push_back(real ? s.next_sentence_labels[q] : -100);
      }
    }
    return out;
  }
  std::int64_t max_predictions() const override { return reader_->max_predictions(); }
  std::int64_t rows() const override { return reader_->size(); }
  std::int64_t packed_sequences() const override { return reader_->max_sequences(); }
  double sequences_per_row() const override { return per_row_; }
  std::string description() const override {
    return fmt::format(
        "{}: {} rows of {} tokens (up to {} sequences, {:.2f} on average, {} predictions "
        "each), {}",
        format_, reader_->size(), reader_->seq_len(), reader_->max_sequences(), per_row_,
        reader_->max_predictions(), order_.description);
  }

 private:
  std::unique_ptr<Reader> reader_;
  std::string format_;
  std::int64_t vocab_, positions_;
  BertShape shape_;
  SampleOrder order_;
  double per_row_ = 1.0;
};

}  // namespace

std::unique_ptr<PretrainingData> open_packed_data(const DataSource& config, const BertConfig& model,
                                                  BertShape shape) {
  auto reader = open_data_files<PackedHdf5Reader>(config);
  SampleOrder order = sample_order(config.data, reader->size());
  return std::make_unique<PackedData<PackedHdf5Reader>>(std::move(reader), "packed MLPerf HDF5",
                                                        config, model, shape, std::move(order));
}

std::unique_ptr<PretrainingData> open_packed_rows(std::unique_ptr<TfRecordPackedReader> reader,
                                                  std::string format, const DataSource& config,
                                                  const BertConfig& model, BertShape shape,
                                                  SampleOrder order) {
  return std::make_unique<PackedData<TfRecordPackedReader>>(std::move(reader), std::move(format),
                                                            config, model, shape, std::move(order));
}

}  // namespace polyhal
