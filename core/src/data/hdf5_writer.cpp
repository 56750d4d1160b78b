#include "data/hdf5_writer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "polyhal/error.hpp"
#include "util/atomic_file.hpp"

namespace polyhal::detail {

Hdf5Writer::Hdf5Writer(std::filesystem::path path)
    : path_(std::move(path)),
      temporary_(create_unique_temporary(path_)),
      file_(quietly([&] {
              return H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            }),
            H5Fclose) {
  if (!file_.valid())
    throw RuntimeFailure(fmt::format("{}: cannot create (permissions?)", temporary_.string()));
}

Hdf5Writer::~Hdf5Writer() {
  if (committed_) return;
  file_.close();
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void Hdf5Writer::write(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
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

void Hdf5Writer::dataset(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
                         const std::int32_t* values) {
  write(name, rows, columns, file_type, H5T_NATIVE_INT32, values);
}

void Hdf5Writer::dataset(const char* name, std::int64_t rows, std::int64_t columns, hid_t file_type,
                         const float* values) {
  write(name, rows, columns, file_type, H5T_NATIVE_FLOAT, values);
}

void Hdf5Writer::attribute(const char* name, const std::string& value) {
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

void Hdf5Writer::commit() {
  if (!file_.close())
    throw RuntimeFailure(fmt::format("{}: close failed (disk full?)", path_.string()));
  publish_atomically(temporary_, path_);
  committed_ = true;
}

}  // namespace polyhal::detail
