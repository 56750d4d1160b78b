#include "polyhal/app/pretraining_data.hpp"

#include <fmt/format.h>

#include <utility>

#include "data/packed_pretraining_data.hpp"
#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/packed_data.hpp"
#include "polyhal/app/tfrecord_data.hpp"
#include "polyhal/error.hpp"
#include "util/splitmix.hpp"

namespace polyhal {
namespace {

/// "generated" and "pattern": make_pretraining_batch.
class SyntheticData final : public PretrainingData {
 public:
  SyntheticData(const BertConfig& model, BertShape shape, DataSection data,
                std::string description = {})
      : model_(model),
        shape_(shape),
        data_(std::move(data)),
        description_(std::move(description)) {}
  TrainingBatch batch(std::uint64_t index) const override {
    return make_pretraining_batch(model_, shape_, data_, index);
  }
  std::int64_t max_predictions() const override { return data_.max_predictions; }
  std::string description() const override {
    if (!description_.empty()) return description_;
    return fmt::format("{} data (seed {}, {} predictions per sequence)", data_.source, data_.seed,
                       data_.max_predictions);
  }

 private:
  BertConfig model_;
  BertShape shape_;
  DataSection data_;
  std::string description_;
};

/// One sequence per row: MLPerf HDF5 (MlperfHdf5Reader) or TFRecord in
/// Google's layout (TfRecordReader).
template <class Reader>
class MlperfData final : public PretrainingData {
 public:
  MlperfData(std::unique_ptr<Reader> reader, std::string format, const DataSource& config,
             const BertConfig& model, BertShape shape, SampleOrder order)
      : reader_(std::move(reader)),
        format_(std::move(format)),
        vocab_(model.vocab_size),
        shape_(shape),
        order_(std::move(order)),
        where_(fmt::format("{}: key '{}'", config.locate(config.data.key("files")),
                           config.data.key("files"))) {
    if (reader_->seq_len() != shape.seq) {
      throw ConfigError(
          fmt::format("{}: {} holds sequences of {} tokens, but model.seq_len is {} "
                      "(phase 1 data is seq 128, phase 2 seq 512: use the files of this phase)",
                      where_, reader_->files().front().string(), reader_->seq_len(), shape.seq));
    }
  }

  TrainingBatch batch(std::uint64_t index) const override {
    TrainingBatch out;
    out.index = index;
    const auto seq = static_cast<std::size_t>(shape_.seq);
    for (std::int64_t b = 0; b < shape_.batch; ++b) {
      const auto position =
          index * static_cast<std::uint64_t>(shape_.batch) + static_cast<std::uint64_t>(b);
      const MlperfSample s = reader_->sample(order_.row_at(position));
      for (const std::int32_t id : s.input_ids) {
        if (id < 0 || id >= vocab_) {
          throw ConfigError(fmt::format(
              "{} (row {}): token id {} outside the model's vocabulary of {} (data tokenised "
              "with another vocab.txt?)",
              s.file.string(), s.row, id, vocab_));
        }
      }
      std::vector<std::int32_t> labels(seq, -100);
      for (std::size_t k = 0; k < s.masked_lm_positions.size(); ++k) {
        const std::int32_t p = s.masked_lm_positions[k];
        if (p == 0) continue;  // padding: position 0 is [CLS], never masked
        if (p < 0 || static_cast<std::size_t>(p) >= seq) {
          throw ConfigError(
              fmt::format("{} (row {}): masked_lm_positions[{}] = {} outside the "
                          "sequence of {}",
                          s.file.string(), s.row, k, p, seq));
        }
        const std::int32_t label = s.masked_lm_ids[k];
        if (label < 0 || label >= vocab_) {  // a crafted file: never an index out of the logits
          throw ConfigError(fmt::format(
              "{} (row {}): masked_lm_ids[{}] = {} outside the model's vocabulary of {}",
              s.file.string(), s.row, k, label, vocab_));
        }
        labels[static_cast<std::size_t>(p)] = label;
      }
      if (s.next_sentence_label != 0 && s.next_sentence_label != 1) {
        throw ConfigError(fmt::format("{} (row {}): next_sentence_labels = {}: expected 0 or 1",
                                      s.file.string(), s.row, s.next_sentence_label));
      }
      for (std::size_t t = 0; t < seq; ++t) {
        if ((s.segment_ids[t] != 0 && s.segment_ids[t] != 1) ||
            (s.input_mask[t] != 0 && s.input_mask[t] != 1)) {
          throw ConfigError(fmt::format(
              "{} (row {}): segment_ids / input_mask at {} are {} / {}: expected 0 or 1",
              s.file.string(), s.row, t, s.segment_ids[t], s.input_mask[t]));
        }
      }
      auto append = [](std::vector<std::int32_t>& to, const std::vector<std::int32_t>& from) {
        to.insert(to.end(), from.begin(), from.end());
      };
      append(out.inputs.input_ids, s.input_ids);
      append(out.inputs.token_type_ids, s.segment_ids);
      append(out.inputs.attention_mask, s.input_mask);
      append(out.mlm_labels, labels);
      out.nsp_labels.push_back(s.next_sentence_label);
    }
    return out;
  }
  std::int64_t max_predictions() const override { return reader_->max_predictions(); }
  std::int64_t rows() const override { return reader_->size(); }
  std::string description() const override {
    return fmt::format("{}: {} samples of seq {} ({} predictions) in {} file(s), {}", format_,
                       reader_->size(), reader_->seq_len(), reader_->max_predictions(),
                       reader_->files().size(), order_.description);
  }

 private:
  std::unique_ptr<Reader> reader_;
  std::string format_;
  std::int64_t vocab_;
  BertShape shape_;
  SampleOrder order_;
  std::string where_;
};

/// data.packed against what the files hold.
void check_packed_setting(const DataSource& config, bool packed) {
  if (config.data.packed != TriState::automatic &&
      packed != (config.data.packed == TriState::yes)) {
    throw config.error(config.data.key("packed"),
                       fmt::format("{}, but {} holds {} rows", tri_state_text(config.data.packed),
                                   config.data.files.string(), packed ? "packed" : "unpacked"));
  }
}

std::unique_ptr<PretrainingData> open_tfrecord_data(const DataSource& config,
                                                    const BertConfig& model, BertShape shape) {
  std::unique_ptr<TfRecordSet> set;
  try {
    set = std::make_unique<TfRecordSet>(config.data.files);
  } catch (const ConfigError& e) {
    throw config.error(config.data.key("files"), e.what());
  }
  check_packed_setting(config, set->packed());
  std::string format = fmt::format("TFRecord ({} layout{})", to_string(set->layout()),
                                   set->any_gzip() ? ", GZIP" : "");
  SampleOrder order = sample_order(config.data, set->size());
  // A GZIP stream has no random access: its files are read in a seeded
  // order each epoch and shuffled in blocks of data.shuffle_buffer.
  if (config.data.shuffle && set->any_gzip()) {
    set->shuffle_in_blocks(config.data.seed, config.data.shuffle_buffer);
    const TfRecordSet* stream = set.get();  // owned by the reader the data source keeps
    order = {[stream](std::uint64_t position) { return stream->record_at(position); },
             fmt::format("shuffled per epoch: files in a seeded order, then blocks of {} samples "
                         "({}, seed {})",
                         config.data.shuffle_buffer, config.data.key("shuffle_buffer"),
                         config.data.seed)};
  }
  if (set->packed())
    return open_packed_rows(std::make_unique<TfRecordPackedReader>(std::move(set)),
                            std::move(format), config, model, shape, std::move(order));
  return std::make_unique<MlperfData<TfRecordReader>>(
      std::make_unique<TfRecordReader>(std::move(set)), std::move(format), config, model, shape,
      std::move(order));
}

}  // namespace

PretrainingData::~PretrainingData() = default;

std::int64_t sample_at(std::uint64_t position, std::int64_t size, std::uint64_t seed,
                       bool shuffle) {
  const auto n = static_cast<std::uint64_t>(size);
  const std::uint64_t epoch = position / n, j = position % n;
  if (!shuffle || n == 1) return static_cast<std::int64_t>(j);
  // A 4-round Feistel network is a bijection on [0, 4^half); walking the
  // cycle until the value falls below n makes it one on [0, n).
  unsigned bits = 1;
  while ((std::uint64_t{1} << bits) < n) ++bits;
  const unsigned half = (bits + 1) / 2;
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  const std::uint64_t key = detail::splitmix64(seed * 0x9e3779b97f4a7c15ull + epoch + 1);
  std::uint64_t x = j;
  do {
    std::uint64_t left = x >> half, right = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t f = detail::splitmix64(key ^ (round << 56) ^ right) & mask;
      left = std::exchange(right, left ^ f);
    }
    x = left << half | right;
  } while (x >= n);
  return static_cast<std::int64_t>(x);
}

std::unique_ptr<PretrainingData> planned_pretraining_data(const DataSource& config,
                                                          const BertConfig& model,
                                                          BertShape shape) {
  const bool reads_files = config.data.source == "mlperf_hdf5" || config.data.source == "tfrecord";
  std::error_code error;
  if (!reads_files || config.data.files.empty() ||
      std::filesystem::exists(config.data.files, error))
    return nullptr;
  return std::make_unique<SyntheticData>(
      model, shape, config.data,
      fmt::format("{} data at {} (not on this machine: planned as the config describes it, "
                  "unpacked rows of {} tokens with {} predictions each)",
                  config.data.source, config.data.files.string(), shape.seq,
                  config.data.max_predictions));
}

std::unique_ptr<PretrainingData> open_pretraining_data(const DataSource& config,
                                                       const BertConfig& model, BertShape shape) {
  if (config.data.source == "mlperf_hdf5") {
    const bool packed = is_packed_data(config.data.files);
    check_packed_setting(config, packed);
    if (packed) return open_packed_data(config, model, shape);
    auto reader = open_data_files<MlperfHdf5Reader>(config);
    SampleOrder order = sample_order(config.data, reader->size());
    return std::make_unique<MlperfData<MlperfHdf5Reader>>(std::move(reader), "MLPerf HDF5", config,
                                                          model, shape, std::move(order));
  }
  if (config.data.source == "tfrecord") return open_tfrecord_data(config, model, shape);
  if (config.data.source == "generated" || config.data.source == "pattern") {
    // Words are drawn past the special tokens: a smaller vocabulary has none.
    if (model.vocab_size < smallest_generated_vocabulary())
      throw config.error("model.vocab_size",
                         fmt::format("{} data draws words past the special tokens (ids 0-{}), "
                                     "so it needs a vocabulary of at least {}, got {}",
                                     config.data.source, smallest_generated_vocabulary() - 2,
                                     smallest_generated_vocabulary(), model.vocab_size));
    // Sentence B is token type 1 (next-sentence prediction): one type has no row for it.
    if (model.type_vocab_size < 2)
      throw config.error(
          "model.type_vocab_size",
          fmt::format("{} data has two sentences per sequence (token types "
                      "0 and 1), so it needs a type_vocab_size of at least 2, got {}",
                      config.data.source, model.type_vocab_size));
    return std::make_unique<SyntheticData>(model, shape, config.data);
  }
  throw config.error(config.data.key("source"),
                     fmt::format("pre-training reads generated, pattern, mlperf_hdf5 or tfrecord, "
                                 "not \"{}\"",
                                 config.data.source));
}

}  // namespace polyhal
