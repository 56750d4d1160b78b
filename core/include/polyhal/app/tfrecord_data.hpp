#pragma once
/// @file tfrecord_data.hpp
/// BERT pre-training data in TFRecord files (`data.source: tfrecord`), as the
/// seeds' TensorFlow recipes hold it, plain or GZIP-compressed. Three layouts
/// of tf.train.Example, told apart by their feature names:
///
/// - google: Google's create_pretraining_data.py (and MLPerf's, Habana's and
///   Graphcore's unpacked data): input_ids, input_mask, segment_ids [S];
///   masked_lm_positions, masked_lm_ids [P] (0-padded), masked_lm_weights [P]
///   (float, 1 real, 0 padding); next_sentence_labels [1].
/// - graphcore_remasked: Graphcore's TensorFlow create_pretraining_data.py
///   --remask: the masked tokens moved to the first P slots of input_ids,
///   the others after them up to seq_padding_index, each token's original
///   position in input_position [S]; mask_padding_index and
///   seq_padding_index [1]; masked_labels [P] in slot order. Rows are put
///   back in Google's layout.
/// - habana_packed: Habana's pack_pretraining_data_tfrec.py: the same names
///   plus positions [S] and next_sentence_positions, next_sentence_weights
///   [K]; input_mask and masked_lm_weights hold each token's sequence number
///   1..K; each sequence starts with its [CLS].
/// - graphcore_packed: Graphcore's pack_pretraining_data.py: packed_input_ids,
///   packed_input_mask, packed_segment_ids, packed_position_ids [S];
///   packed_masked_lm_positions, packed_masked_lm_ids, packed_masked_lm_mask
///   [P]; packed_next_sentence_labels, packed_next_sentence_mask [K]; the
///   [CLS] of sequence k moved to position S-k and its label to index K-k.
///
/// Packed rows are given in polyhal's packed layout (packed_data.hpp): the
/// Graphcore rows are rearranged so each sequence starts with its [CLS];
/// sequence numbers in weights become 1. Every row is checked before use;
/// errors name the file, the record number and the feature.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "polyhal/app/mlperf_hdf5.hpp"
#include "polyhal/app/not_for_plugins.hpp"
#include "polyhal/app/packed_data.hpp"

namespace polyhal {

enum class TfRecordLayout { google, graphcore_remasked, habana_packed, graphcore_packed };
const char* to_string(TfRecordLayout layout);

/// The TFRecord files `path` names: the file itself, or every regular file
/// of the directory in name order except hidden ones and the side files the
/// vendors' tools write beside the data (*.json, *.index, *.txt, *.log,
/// *.md). ConfigError when there is none.
std::vector<std::filesystem::path> tfrecord_files(const std::filesystem::path& path);

/// Files of one layout and one shape (S, P, K from the first record; every
/// record must agree), read as one sequence of records. Each file's frames
/// are walked when opened (TfRecordFile): a truncated or damaged frame is an
/// error before training starts; a record's data CRC is checked when read.
class TfRecordSet {
 public:
  explicit TfRecordSet(const std::filesystem::path& path);
  ~TfRecordSet();
  TfRecordSet(const TfRecordSet&) = delete;
  TfRecordSet& operator=(const TfRecordSet&) = delete;

  TfRecordLayout layout() const noexcept;
  bool packed() const noexcept;  ///< habana_packed or graphcore_packed
  bool any_gzip() const noexcept;
  std::int64_t size() const noexcept;  ///< records in all files
  std::int64_t seq_len() const noexcept;
  std::int64_t max_predictions() const noexcept;
  std::int64_t max_sequences() const noexcept;  ///< K; 1 for the google layout
  const std::vector<std::filesystem::path>& files() const noexcept;

  /// Shuffles the records as TensorFlow users shuffle data read in order
  /// (GZIP): each epoch reads the files in another seeded order and
  /// shuffles the stream in consecutive blocks of `buffer` records, each
  /// decoded once, in order, and kept while it is read (two at most).
  void shuffle_in_blocks(std::uint64_t seed, std::int64_t buffer);
  /// The record stream position `position` (across epochs) reads: in order,
  /// or after shuffle_in_blocks in its order, with that record's block
  /// read. Safe from several threads.
  std::int64_t record_at(std::uint64_t position) const;

  /// Record `index` of an unpacked layout, as MLPerf HDF5 gives it
  /// (masked_lm_positions of weight 0 set to 0). Safe from several threads.
  MlperfSample sample(std::int64_t index) const;
  /// Record `index` of a packed layout in polyhal's packed layout, checked
  /// as PackedHdf5Reader checks its rows.
  PackedSample packed_sample(std::int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The google layout through the interface MlperfHdf5Reader has.
class TfRecordReader {
 public:
  /// Throws ConfigError when `set` holds packed rows.
  explicit TfRecordReader(std::unique_ptr<TfRecordSet> set);
  std::int64_t size() const noexcept { return set_->size(); }
  std::int64_t seq_len() const noexcept { return set_->seq_len(); }
  std::int64_t max_predictions() const noexcept { return set_->max_predictions(); }
  const std::vector<std::filesystem::path>& files() const noexcept { return set_->files(); }
  bool any_gzip() const noexcept { return set_->any_gzip(); }
  MlperfSample sample(std::int64_t index) const { return set_->sample(index); }

 private:
  std::unique_ptr<TfRecordSet> set_;
};

/// The packed layouts through the interface PackedHdf5Reader has.
class TfRecordPackedReader {
 public:
  /// Throws ConfigError when `set` holds unpacked rows.
  explicit TfRecordPackedReader(std::unique_ptr<TfRecordSet> set);
  std::int64_t size() const noexcept { return set_->size(); }
  std::int64_t seq_len() const noexcept { return set_->seq_len(); }
  std::int64_t max_predictions() const noexcept { return set_->max_predictions(); }
  std::int64_t max_sequences() const noexcept { return set_->max_sequences(); }
  const std::vector<std::filesystem::path>& files() const noexcept { return set_->files(); }
  bool any_gzip() const noexcept { return set_->any_gzip(); }
  TfRecordLayout layout() const noexcept { return set_->layout(); }
  PackedSample sample(std::int64_t index) const { return set_->packed_sample(index); }

 private:
  std::unique_ptr<TfRecordSet> set_;
};

}  // namespace polyhal
