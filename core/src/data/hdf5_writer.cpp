#include "data/hdf5_writer.hpp"

namespace polyhal::detail {

Hdf5Writer::Hdf5Writer(std::filesystem::path path) : file_(hdf5_module().create(std::move(path))) {}

Hdf5Writer::~Hdf5Writer() = default;

void Hdf5Writer::dataset(const char* name, std::int64_t rows, std::int64_t columns,
                         Hdf5Stored stored, const std::int32_t* values) {
  file_->dataset(name, rows, columns, stored, values);
}

void Hdf5Writer::dataset(const char* name, std::int64_t rows, std::int64_t columns,
                         Hdf5Stored stored, const float* values) {
  file_->dataset(name, rows, columns, stored, values);
}

void Hdf5Writer::attribute(const char* name, const std::string& value) {
  file_->attribute(name, value);
}

void Hdf5Writer::commit() {
  file_->commit();
}

}  // namespace polyhal::detail
