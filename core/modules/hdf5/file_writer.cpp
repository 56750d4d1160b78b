// The HDF5 module's writer: one file written whole to a temporary beside its
// name and renamed over it by commit() (hdf5_writer.hpp says why).
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "hdf5_handle.hpp"
#include "hdf5_parts.hpp"
#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"

namespace polyhal::detail {
namespace {

hid_t file_type(Hdf5Stored stored) {
  switch (stored) {
    case Hdf5Stored::i8:
      return H5T_STD_I8LE;
    case Hdf5Stored::i32:
      return H5T_STD_I32LE;
    case Hdf5Stored::f32:
      return H5T_IEEE_F32LE;
  }
  return H5T_STD_I32LE;
}

class FileWriter final : public Hdf5FileWriter {
 public:
  explicit FileWriter(std::filesystem::path path);
  ~FileWriter() override;
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
               const std::int32_t* values) override {
    write(name, rows, columns, file_type(stored), H5T_NATIVE_INT32, values);
  }
  void dataset(const char* name, std::int64_t rows, std::int64_t columns, Hdf5Stored stored,
               const float* values) override {
    write(name, rows, columns, file_type(stored), H5T_NATIVE_FLOAT, values);
  }
  void attribute(const char* name, const std::string& value) override;
  void commit() override;

 private:
  void write(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
             hid_t memory_type, const void* values);
  std::filesystem::path path_, temporary_;
  Handle file_;
  bool committed_ = false;
};

FileWriter::FileWriter(std::filesystem::path path)
    : path_(std::move(path)),
      temporary_(create_unique_temporary(path_)),
      file_(quietly([&] {
              return H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            }),
            H5Fclose) {
  if (!file_.valid())
    throw RuntimeFailure(fmt::format("{}: cannot create (permissions?)", temporary_.string()));
}

FileWriter::~FileWriter() {
  if (committed_) return;
  file_.close();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void FileWriter::write(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
                       hid_t memory_type, const void* values) {
  const std::array<hsize_t, 2> dims{static_cast<hsize_t>(rows), static_cast<hsize_t>(columns)};
  const Handle space(H5Screate_simple(columns > 0 ? 2 : 1, dims.data(), nullptr), H5Sclose);
  const Handle dataset(quietly([&] {
                         return H5Dcreate2(file_.get(), name, file_type, space.get(), H5P_DEFAULT,
                                           H5P_DEFAULT, H5P_DEFAULT);
                       }),
                       H5Dclose);
  if (!dataset.valid() || quietly([&] {
                            return H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL,
                                            H5P_DEFAULT, values);
                          }) < 0)
    throw RuntimeFailure(
        fmt::format("{}: cannot write dataset '{}' (disk full?)", path_.string(), name));
}

void FileWriter::attribute(const char* name, const std::string& value) {
  const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type.get(), std::max<std::size_t>(value.size(), 1));
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  const Handle attribute(quietly([&] {
                           return H5Acreate2(file_.get(), name, type.get(), space.get(),
                                             H5P_DEFAULT, H5P_DEFAULT);
                         }),
                         H5Aclose);
  if (!attribute.valid() ||
      quietly([&] { return H5Awrite(attribute.get(), type.get(), value.c_str()); }) < 0)
    throw RuntimeFailure(
        fmt::format("{}: cannot write attribute '{}' (disk full?)", path_.string(), name));
}

void FileWriter::commit() {
  if (!file_.close())
    throw RuntimeFailure(fmt::format("{}: close failed (disk full?)", path_.string()));
  publish_atomically(temporary_, path_);
  committed_ = true;
}

}  // namespace

std::unique_ptr<Hdf5FileWriter> create_file_writer(std::filesystem::path path) {
  return std::make_unique<FileWriter>(std::move(path));
}

}  // namespace polyhal::detail
