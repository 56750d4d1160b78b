// polyhal's HDF5 module: its entry point (core/src/runtime/core_module.hpp).
#include <string_view>

#include "hdf5_parts.hpp"

namespace polyhal::detail {
namespace {

class LibHdf5Module final : public Hdf5Module {
 public:
  std::unique_ptr<Hdf5RowsSource> open_rows(const std::filesystem::path& path,
                                            std::vector<std::string> datasets,
                                            std::string what) const override {
    return open_file_rows(path, std::move(datasets), std::move(what));
  }
  bool has_dataset(const std::filesystem::path& path, const std::string& dataset) const override {
    return file_has_dataset(path, dataset);
  }
  std::unique_ptr<Hdf5FileWriter> create(std::filesystem::path path) const override {
    return create_file_writer(std::move(path));
  }
};

}  // namespace
}  // namespace polyhal::detail

extern "C" __attribute__((visibility("default"))) const void* polyhal_module_entry(
    const char* version) {
  static const polyhal::detail::LibHdf5Module module;
  return std::string_view(version) == POLYHAL_VERSION ? &module : nullptr;
}
