#pragma once
/// @file pretraining_data.hpp
/// Where pre-training micro-batches come from (`data.source`): generated
/// tokens, a learnable pattern, or MLPerf BERT HDF5 files. Every source is a
/// function of the micro-batch index, so a resumed run, and every replica,
/// sees exactly the batches of an uninterrupted single run.
#include <cstdint>
#include <memory>
#include <string>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/bert_config.hpp"
#include "polyhal/app/bert_training.hpp"
#include "polyhal/app/data_settings.hpp"

namespace polyhal {

class PretrainingData {
 public:
  virtual ~PretrainingData();
  /// Micro-batch number `index` of the stream. Safe to call from several
  /// replica threads at once.
  virtual TrainingBatch batch(std::uint64_t index) const = 0;
  /// The most labelled positions any sequence can have (sizes the MLM
  /// head's gather: BertTraining's max_predictions).
  virtual std::int64_t max_predictions() const = 0;
  /// One line for the log: what is read, how many samples.
  virtual std::string description() const = 0;
  /// Packed rows: the most sequences a row holds (BertTraining's
  /// packed_sequences); 0 for one sequence per row.
  virtual std::int64_t packed_sequences() const { return 0; }
  /// Sequences per row on average (packed: measured over the first rows); 1
  /// for one sequence per row. Device-model estimates count sequences with it.
  virtual double sequences_per_row() const { return 1.0; }
  /// Rows the files hold (one epoch); 0 for an endless generated stream.
  virtual std::int64_t rows() const { return 0; }
};

/// Micro-batch number `index` of the data stream: [CLS] A [SEP] B [SEP],
/// 15%-style masking (80% [MASK], 10% random, 10% kept, at most
/// max_predictions), NSP labels. Depends only on (data.seed, index), so a
/// resumed run sees exactly the batches an uninterrupted one would.
/// "generated": random tokens (benchmarks); "pattern": learnable (each
/// segment repeats one word; "is next" when B repeats A's word).
TrainingBatch make_pretraining_batch(const BertConfig& config, BertShape shape,
                                     const DataSection& data, std::uint64_t index);
/// The smallest vocabulary make_pretraining_batch can draw words from: one
/// word past the special tokens ([PAD], [CLS], [SEP], [MASK] and the ids
/// reserved below the first word).
std::int64_t smallest_generated_vocabulary() noexcept;

/// For a plan only (`run --compile-only`, `validate --skip-inputs`) of a
/// config written for another machine: when data.files is not here,
/// micro-batches as the config describes them (unpacked rows of
/// model.seq_len, data.max_predictions each), never read for training.
/// nullptr when the files are here or the source reads no files.
std::unique_ptr<PretrainingData> planned_pretraining_data(const DataSource& config,
                                                          const BertConfig& model, BertShape shape);

/// The source `config.data` names, for micro-batches of `shape` on `model`;
/// packed MLPerf HDF5 (`polyhal pack`) when data.packed says so or the
/// files are packed.
/// Throws ConfigError naming the key (file:line) and the data file when the
/// data does not fit the model (sequence length, vocabulary).
std::unique_ptr<PretrainingData> open_pretraining_data(const DataSource& config,
                                                       const BertConfig& model, BertShape shape);

/// The sample at stream position `position` of a data set of `size` samples:
/// epoch = position / size; in order when `shuffle` is false, otherwise a
/// pseudo-random permutation of the epoch keyed by (seed, epoch): a Feistel
/// network with cycle walking, so every sample comes once per epoch, in
/// another order each epoch, without a table of `size` entries.
std::int64_t sample_at(std::uint64_t position, std::int64_t size, std::uint64_t seed, bool shuffle);

}  // namespace polyhal
