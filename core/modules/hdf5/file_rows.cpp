// The HDF5 module's reader: a set of files as one sequence of rows, every
// file vetted in a child process first (hdf5_vetting.hpp).
#include "data/hdf5_module.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <list>
#include <mutex>
#include <optional>
#include <regex>
#include <set>

#include "data/hdf5_vetting.hpp"
#include "data/part_files.hpp"
#include "hdf5_handle.hpp"
#include "hdf5_parts.hpp"
#include "polyhal/error.hpp"
#include "util/regular_file.hpp"

namespace polyhal::detail {
namespace {

Handle open_file(const std::filesystem::path& path) {
  detail::refuse_special_file(path);
  const hid_t id = quietly([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); });
  if (id < 0) {
    throw ConfigError(fmt::format(
        "{}: cannot open as HDF5 (missing, unreadable, or not an HDF5 file)", path.string()));
  }
  return Handle(id, H5Fclose);
}

std::vector<hsize_t> dataset_dims(const Handle& dataset) {
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

std::vector<std::filesystem::path> hdf5_files(const std::filesystem::path& path) {
  std::vector<std::filesystem::path> paths;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".hdf5" || ext == ".h5"))
        paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    if (paths.empty())
      throw ConfigError(
          fmt::format("{}: no *.hdf5 or *.h5 files in this directory", path.string()));
    detail::check_part_set(path, paths);
  } else {
    paths.push_back(path);
  }
  return paths;
}

/// A dataset must hold the rows it claims: a few KB may not declare 2^40
/// rows of unwritten storage (read as fill values, costing minutes before
/// anything is refused). Contiguous data is all there; chunked data (which
/// may be compressed) has every chunk written.
void check_storage(const std::filesystem::path& path, const std::string& name,
                   const Handle& dataset, const std::vector<hsize_t>& dims) {
  const Handle plist(quietly([&] { return H5Dget_create_plist(dataset.get()); }), H5Pclose);
  if (!plist.valid()) return;
  const H5D_layout_t layout = quietly([&] { return H5Pget_layout(plist.get()); });
  const hsize_t rows = dims[0], columns = dims.size() == 2 ? dims[1] : 1;
  if (layout == H5D_CONTIGUOUS) {
    const Handle type(quietly([&] { return H5Dget_type(dataset.get()); }), H5Tclose);
    const hsize_t element = type.valid() ? H5Tget_size(type.get()) : 0;
    const hsize_t stored = H5Dget_storage_size(dataset.get());
    if (element > 0 && stored / element / columns < rows)
      throw ConfigError(fmt::format(
          "{}: dataset '{}' claims {} rows but stores {} bytes ({} rows): a truncated or "
          "crafted file",
          path.string(), name, rows, stored, stored / element / columns));
  } else if (layout == H5D_CHUNKED) {
    std::array<hsize_t, 2> chunk{1, 1};
    const int rank = quietly([&] { return H5Pget_chunk(plist.get(), 2, chunk.data()); });
    if (rank < 1) return;
    const hsize_t chunk_rows = std::max<hsize_t>(chunk[0], 1);
    const hsize_t chunk_columns = rank == 2 ? std::max<hsize_t>(chunk[1], 1) : 1;
    const hsize_t expected =
        ((rows + chunk_rows - 1) / chunk_rows) * ((columns + chunk_columns - 1) / chunk_columns);
    hsize_t written = 0;
    const Handle space(H5Dget_space(dataset.get()), H5Sclose);
    if (!space.valid() ||
        quietly([&] { return H5Dget_num_chunks(dataset.get(), space.get(), &written); }) < 0)
      written = H5Dget_storage_size(dataset.get()) == 0 ? 0 : expected;  // unknown: trust it
    if (written < expected)
      throw ConfigError(
          fmt::format("{}: dataset '{}' claims {} rows but only {} of its {} chunks are written: a "
                      "truncated or crafted file",
                      path.string(), name, rows, written, expected));
  }
}

/// The open datasets of one file.
struct OpenFile {
  Handle file;
  std::vector<Handle> datasets;
};

struct FileInfo {
  std::filesystem::path path;
  std::int64_t first = 0, count = 0;  // row range in the whole set
  bool data_vetted = false;           // every row read once in a child process
};

struct FileRows final : Hdf5RowsSource {
  std::vector<std::string> names;
  std::string what;
  mutable std::vector<FileInfo> infos;  // data_vetted set under `lock`
  std::vector<std::filesystem::path> paths;
  std::vector<std::int64_t> widths;  // -1 until the first file
  std::int64_t size_ = 0;
  mutable std::mutex lock;                                   // HDF5 (serial) is not thread-safe
  mutable std::list<std::pair<std::size_t, OpenFile>> open;  // most recent first
  static constexpr std::size_t kOpenFiles = 8;

  OpenFile open_checked(const std::filesystem::path& path) const {
    OpenFile f{open_file(path), {}};
    for (const auto& name : names) {
      // A data file may not make us read other files: no external or soft
      // links (checked before opening, which would follow them), no
      // external raw storage, no virtual datasets mapping other files.
      H5L_info_t link{};
      if (quietly([&] { return H5Lget_info(f.file.get(), name.c_str(), &link, H5P_DEFAULT); }) >=
              0 &&
          link.type != H5L_TYPE_HARD) {
        throw ConfigError(fmt::format(
            "{}: dataset '{}' is {} link: refused (a data file may not point at other files)",
            path.string(), name, link.type == H5L_TYPE_EXTERNAL ? "an external" : "a soft"));
      }
      const hid_t id = quietly([&] { return H5Dopen2(f.file.get(), name.c_str(), H5P_DEFAULT); });
      if (id < 0) {
        throw ConfigError(fmt::format("{}: no dataset '{}': not {} (expected {})", path.string(),
                                      name, what, fmt::join(names, ", ")));
      }
      f.datasets.emplace_back(id, H5Dclose);
      const Handle plist(quietly([&] { return H5Dget_create_plist(id); }), H5Pclose);
      if (!plist.valid() || quietly([&] { return H5Pget_external_count(plist.get()); }) != 0 ||
          quietly([&] { return H5Pget_layout(plist.get()); }) == H5D_VIRTUAL) {
        throw ConfigError(fmt::format(
            "{}: dataset '{}' keeps its data outside the file (external storage or a virtual "
            "dataset): refused",
            path.string(), name));
      }
    }
    return f;
  }

  /// Opens `path`, checks every dataset's shape, returns its row count.
  std::int64_t inspect(const std::filesystem::path& path) {
    const OpenFile f = open_checked(path);
    std::int64_t rows = -1;
    for (std::size_t d = 0; d < names.size(); ++d) {
      const auto dims = dataset_dims(f.datasets[d]);
      if (dims.empty() || dims.size() > 2 || dims[0] == 0 || (dims.size() == 2 && dims[1] == 0))
        throw ConfigError(fmt::format("{}: dataset '{}' must be [rows] or [rows, columns], got {}",
                                      path.string(), names[d], fmt::join(dims, " x ")));
      if (dims[0] > (1ull << 40))
        throw ConfigError(
            fmt::format("{}: dataset '{}' claims {} rows", path.string(), names[d], dims[0]));
      const auto here = static_cast<std::int64_t>(dims[0]);
      if (rows < 0) rows = here;
      if (here != rows)
        throw ConfigError(fmt::format("{}: dataset '{}' has {} rows, '{}' has {}", path.string(),
                                      names[d], here, names[0], rows));
      const std::int64_t width = dims.size() == 2 ? static_cast<std::int64_t>(dims[1]) : 0;
      if (width > (1 << 20))
        throw ConfigError(
            fmt::format("{}: dataset '{}' claims {} columns", path.string(), names[d], width));
      check_storage(path, names[d], f.datasets[d], dims);
      if (widths[d] < 0) {
        widths[d] = width;
      } else if (widths[d] != width) {
        throw ConfigError(fmt::format(
            "{}: dataset '{}' has {} columns, but {} has {}: a data set holds one layout",
            path.string(), names[d], width, paths.front().string(), widths[d]));
      }
    }
    return rows;
  }

  /// Reads every row of every dataset of `path`, in blocks, as int32 and
  /// (for float data) as float: every chunk the row reads will touch is
  /// decoded once. Meant for a child process (vet_hdf5_in_child).
  void read_everything(const std::filesystem::path& path) const {
    const OpenFile f = open_checked(path);
    for (std::size_t d = 0; d < names.size(); ++d) {
      const auto dims = dataset_dims(f.datasets[d]);
      if (dims.empty() || dims.size() > 2) return;  // inspect() refuses it
      const hsize_t rows = dims[0], columns = dims.size() == 2 ? std::max<hsize_t>(dims[1], 1) : 1;
      const hsize_t block = std::max<hsize_t>(1, (hsize_t{1} << 20) / columns);
      const Handle type(quietly([&] { return H5Dget_type(f.datasets[d].get()); }), H5Tclose);
      const bool is_float = type.valid() && H5Tget_class(type.get()) == H5T_FLOAT;
      std::vector<std::int32_t> ints(static_cast<std::size_t>(std::min(block, rows) * columns));
      std::vector<float> floats(is_float ? ints.size() : 0);
      for (hsize_t start = 0; start < rows; start += block) {
        const hsize_t count = std::min(block, rows - start);
        const Handle space(H5Dget_space(f.datasets[d].get()), H5Sclose);
        const std::array<hsize_t, 2> offset{start, 0}, extent{count, columns};
        const hsize_t values = count * columns;
        const Handle memory(H5Screate_simple(1, &values, nullptr), H5Sclose);
        const auto read_as = [&](hid_t memory_type, void* out) {
          return quietly([&] {
            const herr_t selected = H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, offset.data(),
                                                        nullptr, extent.data(), nullptr);
            if (selected < 0) return selected;
            return H5Dread(f.datasets[d].get(), memory_type, memory.get(), space.get(), H5P_DEFAULT,
                           out);
          });
        };
        if (read_as(H5T_NATIVE_INT32, ints.data()) < 0 ||
            (is_float && read_as(H5T_NATIVE_FLOAT, floats.data()) < 0)) {
          throw ConfigError(
              fmt::format("{}: cannot read rows {} to {} of dataset '{}' (corrupt "
                          "file?)",
                          path.string(), start, start + count - 1, names[d]));
        }
      }
    }
  }

  const OpenFile& file(std::size_t f) const {
    if (!infos[f].data_vetted) {
      // The first time this file's rows are read: let libhdf5 decode all of
      // it in a child process, where a crash cannot take this one down.
      vet_hdf5_in_child(infos[f].path, [&] { read_everything(infos[f].path); });
      infos[f].data_vetted = true;
    }
    for (auto it = open.begin(); it != open.end(); ++it) {
      if (it->first == f) {
        open.splice(open.begin(), open, it);
        return open.front().second;
      }
    }
    open.emplace_front(f, open_checked(infos[f].path));
    if (open.size() > kOpenFiles) open.pop_back();
    return open.front().second;
  }

  std::size_t file_of(std::int64_t index) const {
    if (index < 0 || index >= size_)
      throw RuntimeFailure(fmt::format("{}: row {} of {}", what, index, size_));
    const auto it = std::upper_bound(infos.begin(), infos.end(), index,
                                     [](std::int64_t i, const FileInfo& f) { return i < f.first; });
    return static_cast<std::size_t>(it - infos.begin()) - 1;
  }

  void read_as(std::int64_t index, std::size_t d, hid_t type, void* out) const {
    const std::size_t f = file_of(index);
    const FileInfo& info = infos[f];
    const std::int64_t row = index - info.first;
    const auto columns = static_cast<hsize_t>(std::max<std::int64_t>(widths[d], 1));
    const std::lock_guard guard(lock);
    const Handle& dataset = file(f).datasets[d];
    const Handle space(H5Dget_space(dataset.get()), H5Sclose);
    const std::array<hsize_t, 2> start{static_cast<hsize_t>(row), 0};
    const std::array<hsize_t, 2> count{1, columns};
    const Handle memory(H5Screate_simple(1, &columns, nullptr), H5Sclose);
    const herr_t status = quietly([&] {
      const herr_t selected = H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(),
                                                  nullptr, count.data(), nullptr);
      if (selected < 0) return selected;
      return H5Dread(dataset.get(), type, memory.get(), space.get(), H5P_DEFAULT, out);
    });
    if (status < 0) {
      throw ConfigError(fmt::format("{}: cannot read row {} of dataset '{}' (corrupt file?)",
                                    info.path.string(), row, names[d]));
    }
  }

  FileRows(const std::filesystem::path& path, std::vector<std::string> datasets, std::string what_)
      : names(std::move(datasets)), what(std::move(what_)) {
    widths.assign(names.size(), -1);
    paths = hdf5_files(path);
    // Every file's structure is parsed in a child process first (about a
    // millisecond a file): a file that makes libhdf5 crash is an error naming it.
    for (const auto& file : paths) {
      vet_hdf5_in_child(file, [&] { inspect(file); });
    }
    for (const auto& file : paths) {
      const std::int64_t rows = inspect(file);
      infos.push_back({file, size_, rows});
      size_ += rows;
    }
  }

  std::int64_t size() const noexcept override { return size_; }
  std::int64_t width(std::size_t d) const noexcept override { return widths[d]; }
  const std::vector<std::filesystem::path>& files() const noexcept override { return paths; }
  Hdf5RowPlace place(std::int64_t index) const override {
    const auto& info = infos[file_of(index)];
    return {info.path, index - info.first};
  }
  void read(std::int64_t index, std::size_t d, std::int32_t* out) const override {
    read_as(index, d, H5T_NATIVE_INT32, out);
  }
  void read(std::int64_t index, std::size_t d, float* out) const override {
    read_as(index, d, H5T_NATIVE_FLOAT, out);
  }
};

}  // namespace

std::unique_ptr<Hdf5RowsSource> open_file_rows(const std::filesystem::path& path,
                                               std::vector<std::string> datasets,
                                               std::string what) {
  return std::make_unique<FileRows>(path, std::move(datasets), std::move(what));
}

bool file_has_dataset(const std::filesystem::path& path, const std::string& dataset) {
  std::vector<std::filesystem::path> paths;
  try {
    paths = hdf5_files(path);
  } catch (const ConfigError&) {
    return false;
  }
  const auto has = [&] {
    const hid_t id =
        quietly([&] { return H5Fopen(paths.front().c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); });
    if (id < 0) return false;
    const Handle file(id, H5Fclose);
    return quietly([&] { return H5Lexists(file.get(), dataset.c_str(), H5P_DEFAULT); }) > 0;
  };
  vet_hdf5_in_child(paths.front(), [&] { has(); });
  return has();
}

}  // namespace polyhal::detail
