#pragma once
// One HDF5 file written whole and put in place atomically: datasets go to
// a unique temporary file beside it (create_unique_temporary), and commit() closes it, fsyncs and
// renames it over `path`. A writer destroyed before commit() (an error, a throw) removes the
// temporary file, so a crash or a full disk never leaves a half-written
// data file under the real name.
#include <cstdint>
#include <filesystem>
#include <string>

#include "data/hdf5_handle.hpp"

namespace polyhal::detail {

class Hdf5Writer {
 public:
  /// Throws RuntimeFailure naming the file when it cannot be created.
  explicit Hdf5Writer(std::filesystem::path path);
  ~Hdf5Writer();
  Hdf5Writer(const Hdf5Writer&) = delete;
  Hdf5Writer& operator=(const Hdf5Writer&) = delete;

  /// A [rows, columns] dataset (columns 0: [rows]) stored as `file_type`
  /// (H5T_STD_I32LE, H5T_STD_I8LE, H5T_IEEE_F32LE, ...) from host values.
  void dataset(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
               const std::int32_t* values);
  void dataset(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
               const float* values);
  /// A string attribute of the file.
  void attribute(const char* name, const std::string& value);
  /// Closes the file and puts it in place; throws RuntimeFailure naming it.
  void commit();

 private:
  void write(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
             hid_t memory_type, const void* values);
  std::filesystem::path path_, temporary_;
  Handle file_;
  bool committed_ = false;
};

}  // namespace polyhal::detail
