#pragma once
/// @file packed_data.hpp
/// `polyhal pack`: MLPerf BERT HDF5 in, packed HDF5 out (packing.hpp picks
/// which sequences share a row). The layout follows the seeds' packed BERT
/// format; per file, N packs of S tokens holding at most K sequences and P
/// masked positions:
///   packed_input_ids, packed_segment_ids      [N, S] int32
///   packed_input_mask                         [N, S] int32: the token's
///                                             sequence in the pack, 1..K; 0 padding
///   packed_position_ids                       [N, S] int32: restart at 0 per sequence
///   packed_masked_lm_positions, _ids          [N, P] int32 (positions in the pack)
///   packed_masked_lm_weights                  [N, P] float32: 1 real, 0 padding
///   packed_next_sentence_positions            [N, K] int32: each sequence's [CLS]
///   packed_next_sentence_labels               [N, K] int32
///   packed_next_sentence_weights              [N, K] float32: 1 real, 0 padding
/// and file attributes algorithm, max_sequences_per_pack and source.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/packing.hpp"

namespace polyhal {

struct PackOptions {
  std::filesystem::path input;   ///< an MLPerf HDF5 file or a directory of them
  std::filesystem::path output;  ///< a directory: absent, or without .hdf5 files
  std::int64_t max_seq_len = 512;
  std::string algorithm = "spfhp";  ///< spfhp | nnlshp
  std::int64_t max_sequences_per_pack = 3;
  std::int64_t rows_per_file = 16384;
};

struct PackResult {
  PackingStats stats;
  std::int64_t max_predictions_per_pack = 0;  ///< P: the most any pack holds
  std::vector<std::filesystem::path> files;
};

/// Called with the phase ("reading", "writing") and progress in it.
using PackProgress =
    std::function<void(const std::string& phase, std::int64_t done, std::int64_t total)>;

/// Reads every sample, checks it (a sequence longer than max_seq_len, an
/// input_mask that is not 1s then 0s, a masked position outside the
/// sequence: ConfigError naming file, sample and field), packs and writes
/// part-NNNNN-of-MMMMM.hdf5 files, each to a temporary name renamed when
/// complete.
PackResult pack_mlperf_hdf5(const PackOptions& options, const PackProgress& progress = {});

/// One packed row as stored.
struct PackedSample {
  std::vector<std::int32_t> input_ids, segment_ids, input_mask, position_ids;  ///< [S]
  std::vector<std::int32_t> masked_lm_positions, masked_lm_ids;                ///< [P]
  std::vector<float> masked_lm_weights;                                        ///< [P]
  std::vector<std::int32_t> next_sentence_positions, next_sentence_labels;     ///< [K]
  std::vector<float> next_sentence_weights;                                    ///< [K]
  std::filesystem::path file;  ///< where it came from, for messages
  std::int64_t row = 0;
  /// Sequences in the row (the weighted next-sentence entries).
  std::int64_t sequences() const;
};

/// Packed files in the layout above: a file, or a directory of them read in
/// name order. Shapes are checked when opened; every row when read: the
/// sequences contiguous and numbered 1, 2, ... from the start, position ids
/// restarting at each, a [CLS] position per sequence at its start, masked
/// positions inside a sequence, weights 0 or 1 (ConfigError naming file,
/// row and field).
class PackedHdf5Reader {
 public:
  explicit PackedHdf5Reader(const std::filesystem::path& path);
  ~PackedHdf5Reader();
  PackedHdf5Reader(const PackedHdf5Reader&) = delete;
  PackedHdf5Reader& operator=(const PackedHdf5Reader&) = delete;

  std::int64_t size() const noexcept;             ///< packed rows
  std::int64_t seq_len() const noexcept;          ///< S
  std::int64_t max_predictions() const noexcept;  ///< P per row
  std::int64_t max_sequences() const noexcept;    ///< K per row
  PackedSample sample(std::int64_t index) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Checks one row as PackedHdf5Reader checks each it reads (the rules
/// above it); ConfigError naming row.file, row.row and the field.
void check_packed_row(const PackedSample& row);

/// Whether `path` holds packed data (its first file has packed_input_ids).
bool is_packed_data(const std::filesystem::path& path);

}  // namespace polyhal
