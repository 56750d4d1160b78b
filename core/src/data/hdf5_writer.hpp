#pragma once
// One HDF5 file written whole and put in place atomically: datasets go to
// a unique temporary file beside it (create_unique_temporary), and commit() closes it, fsyncs and
// renames it over `path`. A writer destroyed before commit() (an error, a throw) removes the
// temporary file, so a crash or a full disk never leaves a half-written
// data file under the real name. libhdf5 does the writing, in the HDF5
// module (hdf5_module.hpp), loaded when the first writer is made.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "data/hdf5_module.hpp"

namespace polyhal::detail {

class Hdf5Writer {
 public:
  /// Throws RuntimeFailure naming the file when it cannot be created,
  /// PluginError when the HDF5 module is not installed.
  explicit Hdf5Writer(std::filesystem::path path);
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  /// A [rows, columns] dataset (columns 0: [rows]) stored as `stored` from host values.
  void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
               const std::int32_t* values);
  void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
               const float* values);
  /// A string attribute of the file.
  void attribute(const char* name, const std::string& value);
  /// Closes the file and puts it in place; throws RuntimeFailure naming it.
  void commit();

 private:
  std::unique_ptr<Hdf5FileWriter> file_;
};

}  // namespace polyhal::detail
