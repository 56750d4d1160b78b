#pragma once
// What polyhal's HDF5 module (core/modules/hdf5, libpolyhal-hdf5.so)
// provides (inside libpolyhal, not installed): libhdf5 is linked by the
// module only, so a process that reads and writes no HDF5 never loads it.
// Hdf5Rows and Hdf5Writer are the library's side of it.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace polyhal::detail {

/// How a dataset's values are stored in the file (little-endian).
enum class Hdf5Stored { i8, i32, f32 };

/// Where a row of a set of files is: its file and the row in that file.
struct Hdf5RowPlace {
  std::filesystem::path file;
  std::int64_t row = 0;
};

/// A set of files read as one sequence of rows (see hdf5_rows.hpp).
class Hdf5RowsSource {
 public:
  virtual ~Hdf5RowsSource() = default;
  virtual std::int64_t size() const noexcept = 0;
  virtual std::int64_t width(std::size_t d) const noexcept = 0;
  virtual const std::vector<std::filesystem::path>& files() const noexcept = 0;
  virtual Hdf5RowPlace place(std::int64_t index) const = 0;
  virtual void read(std::int64_t index, std::size_t d, std::int32_t* out) const = 0;
  virtual void read(std::int64_t index, std::size_t d, float* out) const = 0;
};

/// One file written whole and put in place atomically (see hdf5_writer.hpp).
class Hdf5FileWriter {
 public:
  virtual ~Hdf5FileWriter() = default;
  virtual void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
                       const std::int32_t* values) = 0;
  virtual void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
                       const float* values) = 0;
  virtual void attribute(const char* name, const std::string& value) = 0;
  virtual void commit() = 0;
};

class Hdf5Module {
 public:
  virtual ~Hdf5Module() = default;
  virtual std::unique_ptr<Hdf5RowsSource> open_rows(const std::filesystem::path& path,
                                                    std::vector<std::string> datasets,
                                                    std::string what) const = 0;
  virtual bool has_dataset(const std::filesystem::path& path, const std::string& dataset) const = 0;
  virtual std::unique_ptr<Hdf5FileWriter> create(std::filesystem::path path) const = 0;
};

/// The loaded module (load_core_module): throws PluginError without it.
const Hdf5Module& hdf5_module();

}  // namespace polyhal::detail
