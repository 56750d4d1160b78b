#pragma once
// A set of HDF5 files read as one sequence of rows (inside libpolyhal): each
// file holds the same named datasets, [N] or [N, width], N agreeing within
// the file and each width agreeing over all files. The MLPerf and the packed
// pre-training readers are built on it. libhdf5 does the reading, in the
// HDF5 module (hdf5_module.hpp), loaded when the first set is opened.
#include "data/hdf5_module.hpp"

namespace polyhal::detail {

class Hdf5Rows {
 public:
  /// `path`: a file, or a directory whose *.hdf5 / *.h5 files are read in
  /// name order. `what` names the layout in errors ("MLPerf BERT
  /// pre-training data"). Every file is opened and checked here; errors
  /// (ConfigError) name the file and the dataset.
  Hdf5Rows(const std::filesystem::path& path, std::vector<std::string> datasets, std::string what);
  ~Hdf5Rows();
  Hdf5Rows(const Hdf5Rows&) = delete;
  Hdf5Rows& operator=(const Hdf5Rows&) = delete;

  std::int64_t size() const noexcept;  ///< rows in all files
  /// Columns of dataset `d` (0 for a [N] dataset).
  std::int64_t width(std::size_t d) const noexcept;
  const std::vector<std::filesystem::path>& files() const noexcept;

  /// Where row `index` is: its file and the row in that file.
  using Place = Hdf5RowPlace;
  Place place(std::int64_t index) const;
  /// Row `index` of dataset `d` as int32 or float (HDF5 converts), max(width, 1)
  /// values. Thread-safe: Debian's HDF5 is serial, so reads take a lock.
  void read(std::int64_t index, std::size_t d, std::int32_t* out) const;
  void read(std::int64_t index, std::size_t d, float* out) const;

 private:
  std::unique_ptr<Hdf5RowsSource> source_;
};

/// Whether `path` (a file, or the first *.hdf5 / *.h5 file of a directory)
/// has a dataset named `dataset`; false when it cannot be opened.
bool hdf5_has_dataset(const std::filesystem::path& path, const std::string& dataset);

}  // namespace polyhal::detail
