#pragma once
// The HDF5 module's parts, which module.cpp offers through Hdf5Module.
#include "data/hdf5_module.hpp"

namespace polyhal::detail {

std::unique_ptr<Hdf5RowsSource> open_file_rows(const std::filesystem::path& path,
                                               std::vector<std::string> datasets, std::string what);

/// Whether `path` (a file, or the first *.hdf5 / *.h5 file of a directory)
/// has a dataset named `dataset`; false when it cannot be opened.
bool file_has_dataset(const std::filesystem::path& path, const std::string& dataset);

std::unique_ptr<Hdf5FileWriter> create_file_writer(std::filesystem::path path);

}  // namespace polyhal::detail
