// MLPerf BERT HDF5 reader on the HDF5 C library. Every HDF5 handle is owned
// by a Handle (closed on scope exit); HDF5's own error printing is switched
// off around each call (quietly) so that a bad file gives one message
// of ours that names the file and the dataset.
#include "polyhal/mlperf_hdf5.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <array>
#include <list>
#include <mutex>
#include <utility>

#include "polyhal/error.hpp"

namespace polyhal {
namespace {

/// f() with HDF5's automatic error printing off: failures come back as a
/// negative id or status, and become one message of ours.
template <typename F>
auto quietly(F f) {
  decltype(f()) result{};
  H5E_BEGIN_TRY {
    result = f();
  }
  H5E_END_TRY;
  return result;
}

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
  Handle(Handle&& other) noexcept
      : id_(std::exchange(other.id_, H5I_INVALID_HID)), closer_(other.closer_) {}
  Handle& operator=(Handle&& other) noexcept {
    std::swap(id_, other.id_);
    std::swap(closer_, other.closer_);
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (id_ >= 0) quietly([this] { return closer_(id_); });
  }
  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

 private:
  hid_t id_;
  Closer closer_;
};

constexpr std::array<const char*, 6> kDatasets{"input_ids",     "input_mask",
                                               "segment_ids",   "masked_lm_positions",
                                               "masked_lm_ids", "next_sentence_labels"};

Handle open_file(const std::filesystem::path& path) {
  const hid_t id = quietly([&] { return H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); });
  if (id < 0) {
    throw ConfigError(fmt::format(
        "{}: cannot open as HDF5 (missing, unreadable, or not an HDF5 file)", path.string()));
  }
  return Handle(id, H5Fclose);
}

Handle open_dataset(const Handle& file, const std::filesystem::path& path, const char* name) {
  const hid_t id = quietly([&] { return H5Dopen2(file.get(), name, H5P_DEFAULT); });
  if (id < 0) {
    throw ConfigError(fmt::format(
        "{}: no dataset '{}': not MLPerf BERT pre-training data (expected input_ids, "
        "input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels)",
        path.string(), name));
  }
  return Handle(id, H5Dclose);
}

std::vector<hsize_t> dataset_dims(const Handle& dataset) {
  const Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

/// The open datasets of one file.
struct OpenFile {
  Handle file;
  std::vector<Handle> datasets;
};

struct FileInfo {
  std::filesystem::path path;
  std::int64_t first = 0, count = 0;  // sample range in the whole set
};

}  // namespace

struct MlperfHdf5Reader::Impl {
  std::vector<FileInfo> files;
  std::vector<std::filesystem::path> paths;
  std::int64_t size = 0, seq = 0, predictions = 0;
  mutable std::mutex lock;                                   // HDF5 (serial) is not thread-safe
  mutable std::list<std::pair<std::size_t, OpenFile>> open;  // most recent first
  static constexpr std::size_t kOpenFiles = 8;

  OpenFile open_checked(const std::filesystem::path& path) const {
    OpenFile f{open_file(path), {}};
    for (const char* name : kDatasets) f.datasets.push_back(open_dataset(f.file, path, name));
    return f;
  }

  /// Opens `path`, checks every dataset's shape, returns its sample count.
  std::int64_t inspect(const std::filesystem::path& path) {
    const OpenFile f = open_checked(path);
    const auto ids = dataset_dims(f.datasets[0]);
    if (ids.size() != 2 || ids[0] == 0 || ids[1] == 0) {
      throw ConfigError(fmt::format("{}: dataset 'input_ids' must be [samples, seq], got rank {}",
                                    path.string(), ids.size()));
    }
    const auto rows = ids[0];
    const auto labels = dataset_dims(f.datasets[3]);
    if (labels.size() != 2 || labels[0] != rows) {
      throw ConfigError(fmt::format(
          "{}: dataset 'masked_lm_positions' must be [{}, max_predictions]", path.string(), rows));
    }
    const std::array<std::vector<hsize_t>, 6> want{std::vector<hsize_t>{rows, ids[1]},
                                                   {rows, ids[1]},
                                                   {rows, ids[1]},
                                                   {rows, labels[1]},
                                                   {rows, labels[1]},
                                                   {rows}};
    for (std::size_t d = 1; d < kDatasets.size(); ++d) {
      if (dataset_dims(f.datasets[d]) != want[d]) {
        throw ConfigError(
            fmt::format("{}: dataset '{}' does not match input_ids ({} samples of {})",
                        path.string(), kDatasets[d], rows, ids[1]));
      }
    }
    const auto seq_here = static_cast<std::int64_t>(ids[1]);
    const auto predictions_here = static_cast<std::int64_t>(labels[1]);
    if (seq == 0) {
      seq = seq_here, predictions = predictions_here;
    } else if (seq != seq_here || predictions != predictions_here) {
      throw ConfigError(fmt::format(
          "{}: seq {} with {} predictions, but {} has seq {} with {} predictions: a data set "
          "holds one phase's files",
          path.string(), seq_here, predictions_here, paths.front().string(), seq, predictions));
    }
    return static_cast<std::int64_t>(rows);
  }

  const OpenFile& file(std::size_t f) const {
    for (auto it = open.begin(); it != open.end(); ++it) {
      if (it->first == f) {
        open.splice(open.begin(), open, it);
        return open.front().second;
      }
    }
    open.emplace_front(f, open_checked(files[f].path));
    if (open.size() > kOpenFiles) open.pop_back();
    return open.front().second;
  }

  void read_row(const Handle& dataset, const std::filesystem::path& path, const char* name,
                std::int64_t row, std::size_t columns, std::int32_t* out) const {
    const Handle space(H5Dget_space(dataset.get()), H5Sclose);
    const std::array<hsize_t, 2> start{static_cast<hsize_t>(row), 0};
    const std::array<hsize_t, 2> count{1, std::max<hsize_t>(columns, 1)};
    const hsize_t elements = std::max<std::size_t>(columns, 1);
    const Handle memory(H5Screate_simple(1, &elements, nullptr), H5Sclose);
    const herr_t status = quietly([&] {
      const herr_t selected = H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(),
                                                  nullptr, count.data(), nullptr);
      if (selected < 0) return selected;
      return H5Dread(dataset.get(), H5T_NATIVE_INT32, memory.get(), space.get(), H5P_DEFAULT, out);
    });
    if (status < 0) {
      throw ConfigError(fmt::format("{}: cannot read row {} of dataset '{}' (corrupt file?)",
                                    path.string(), row, name));
    }
  }
};

MlperfHdf5Reader::MlperfHdf5Reader(const std::filesystem::path& path)
    : impl_(std::make_unique<Impl>()) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
      const auto ext = entry.path().extension();
      if (entry.is_regular_file() && (ext == ".hdf5" || ext == ".h5"))
        impl_->paths.push_back(entry.path());
    }
    std::sort(impl_->paths.begin(), impl_->paths.end());
    if (impl_->paths.empty())
      throw ConfigError(
          fmt::format("{}: no *.hdf5 or *.h5 files in this directory", path.string()));
  } else {
    impl_->paths.push_back(path);
  }
  for (const auto& file : impl_->paths) {
    const std::int64_t rows = impl_->inspect(file);
    impl_->files.push_back({file, impl_->size, rows});
    impl_->size += rows;
  }
}

MlperfHdf5Reader::~MlperfHdf5Reader() = default;

std::int64_t MlperfHdf5Reader::size() const noexcept {
  return impl_->size;
}
std::int64_t MlperfHdf5Reader::seq_len() const noexcept {
  return impl_->seq;
}
std::int64_t MlperfHdf5Reader::max_predictions() const noexcept {
  return impl_->predictions;
}
const std::vector<std::filesystem::path>& MlperfHdf5Reader::files() const noexcept {
  return impl_->paths;
}

MlperfSample MlperfHdf5Reader::sample(std::int64_t index) const {
  if (index < 0 || index >= impl_->size) {
    throw RuntimeFailure(fmt::format("MLPerf HDF5: sample {} of {}", index, impl_->size));
  }
  const auto it = std::upper_bound(impl_->files.begin(), impl_->files.end(), index,
                                   [](std::int64_t i, const FileInfo& f) { return i < f.first; });
  const auto f = static_cast<std::size_t>(it - impl_->files.begin()) - 1;
  const FileInfo& info = impl_->files[f];
  const std::int64_t row = index - info.first;
  const auto seq = static_cast<std::size_t>(impl_->seq);
  const auto predictions = static_cast<std::size_t>(impl_->predictions);
  MlperfSample s;
  s.file = info.path;
  s.row = row;
  s.input_ids.resize(seq), s.input_mask.resize(seq), s.segment_ids.resize(seq);
  s.masked_lm_positions.resize(predictions), s.masked_lm_ids.resize(predictions);
  const std::lock_guard guard(impl_->lock);
  const OpenFile& open = impl_->file(f);
  const std::array<std::pair<std::int32_t*, std::size_t>, 6> into{
      {{s.input_ids.data(), seq},
       {s.input_mask.data(), seq},
       {s.segment_ids.data(), seq},
       {s.masked_lm_positions.data(), predictions},
       {s.masked_lm_ids.data(), predictions},
       {&s.next_sentence_label, 0}}};
  for (std::size_t d = 0; d < kDatasets.size(); ++d) {
    impl_->read_row(open.datasets[d], info.path, kDatasets[d], row, into[d].second, into[d].first);
  }
  return s;
}

}  // namespace polyhal
