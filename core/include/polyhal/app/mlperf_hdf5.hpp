#pragma once
/// @file mlperf_hdf5.hpp
/// MLPerf BERT pre-training data in HDF5: the layout the MLPerf reference's
/// create_pretraining_data.py and chop_hdf5_files.py write (and the Intel
/// Xeon seed feeds its training): per file, datasets
///   input_ids, input_mask, segment_ids   [N, seq]
///   masked_lm_positions, masked_lm_ids   [N, max_predictions], 0-padded
///   next_sentence_labels                 [N] (1: B is a random sentence)
/// of any integer type, compressed or not.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

/// One sample as stored, at the files' sequence length.
struct MlperfSample {
  std::vector<std::int32_t> input_ids, input_mask, segment_ids;
  std::vector<std::int32_t> masked_lm_positions, masked_lm_ids;  ///< 0-padded
  std::int32_t next_sentence_label = 0;
  std::filesystem::path file;  ///< where it came from, for messages
  std::int64_t row = 0;
};

/// A file, or a directory whose *.hdf5 / *.h5 files are read in name order
/// as one sequence of samples. Every file is checked when opened (datasets
/// present, shapes agreeing, the same seq and max_predictions in all files);
/// errors name the file and the dataset. At most a few files are open at a
/// time, so a 2048-part directory does not exhaust file descriptors.
class MlperfHdf5Reader {
 public:
  explicit MlperfHdf5Reader(const std::filesystem::path& path);
  ~MlperfHdf5Reader();
  MlperfHdf5Reader(const MlperfHdf5Reader&) = delete;
  MlperfHdf5Reader& operator=(const MlperfHdf5Reader&) = delete;

  std::int64_t size() const noexcept;  ///< samples in all files
  std::int64_t seq_len() const noexcept;
  std::int64_t max_predictions() const noexcept;
  const std::vector<std::filesystem::path>& files() const noexcept;

  /// Sample `index` (0 <= index < size()). Safe to call from several threads:
  /// Debian's HDF5 is the serial library, so reads take a lock.
  MlperfSample sample(std::int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace polyhal
