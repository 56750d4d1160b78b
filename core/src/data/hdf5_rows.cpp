#include "data/hdf5_rows.hpp"

#include "runtime/core_module.hpp"

namespace polyhal::detail {

const Hdf5Module& hdf5_module() {
  return *static_cast<const Hdf5Module*>(load_core_module(
      {"hdf5", "reading or writing HDF5 data (MLPerf BERT or packed pre-training files)",
       "POLYHAL_MODULE_HDF5"}));
}

Hdf5Rows::Hdf5Rows(const std::filesystem::path& path, std::vector<std::string> datasets,
                   std::string what)
    : source_(hdf5_module().open_rows(path, std::move(datasets), std::move(what))) {}

Hdf5Rows::~Hdf5Rows() = default;

std::int64_t Hdf5Rows::size() const noexcept {
  return source_->size();
}
std::int64_t Hdf5Rows::width(std::size_t d) const noexcept {
  return source_->width(d);
}
const std::vector<std::filesystem::path>& Hdf5Rows::files() const noexcept {
  return source_->files();
}

Hdf5Rows::Place Hdf5Rows::place(std::int64_t index) const {
  return source_->place(index);
}

void Hdf5Rows::read(std::int64_t index, std::size_t d, std::int32_t* out) const {
  source_->read(index, d, out);
}

void Hdf5Rows::read(std::int64_t index, std::size_t d, float* out) const {
  source_->read(index, d, out);
}

bool hdf5_has_dataset(const std::filesystem::path& path, const std::string& dataset) {
  return hdf5_module().has_dataset(path, dataset);
}

}  // namespace polyhal::detail
