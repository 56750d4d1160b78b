#include "data/tfrecord_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <vector>

#include "polyhal/error.hpp"
#include "util/crc32c.hpp"
#include "util/regular_file.hpp"

namespace polyhal::detail {
namespace {

constexpr std::size_t kHeaderBytes = 12;  // length + its CRC
constexpr std::size_t kFooterBytes = 4;   // the payload's CRC
// A plain file keeps the offset of every 64th record: memory is at most
// 1/1024 of the file however small its records, and a read walks at most
// 63 headers.
constexpr std::int64_t kIndexStride = 64;
// Decompressing cursors kept per GZIP file (about 300 KB each).
constexpr std::size_t kMaxCursors = 8;
constexpr std::uint64_t kMaxGzipExpansion = 100;

std::uint64_t load_u64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | p[i];
  return v;
}
std::uint32_t load_u32(const unsigned char* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

/// The payload length a frame header announces, after its checks.
std::uint64_t checked_length(const unsigned char* header, const std::filesystem::path& path,
                             std::int64_t record, std::uint64_t at) {
  const std::uint64_t length = load_u64(header);
  if (mask_crc32c(crc32c(header, 8)) != load_u32(header + 8))
    throw ConfigError(fmt::format(
        "{}: record {} (byte {}): the length's CRC does not match: not a TFRecord file, or "
        "damaged (a GZIP file whose name or first bytes hide it?)",
        path.string(), record, at));
  if (length > kMaxTfRecordBytes)
    throw ConfigError(
        fmt::format("{}: record {} (byte {}): {} bytes, more than the {} a "
                    "pre-training or fine-tuning example may have",
                    path.string(), record, at, length, kMaxTfRecordBytes));
  return length;
}

void check_payload(const std::string& bytes, const unsigned char* footer,
                   const std::filesystem::path& path, std::int64_t record) {
  if (mask_crc32c(crc32c(bytes.data(), bytes.size())) != load_u32(footer))
    throw ConfigError(fmt::format("{}: record {}: the data's CRC does not match (damaged file)",
                                  path.string(), record));
}

/// An open file descriptor, closed with its owner.
class Descriptor {
 public:
  explicit Descriptor(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0)
      throw ConfigError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
  }
  ~Descriptor() { ::close(fd_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  /// Reads up to `size` bytes at `offset`; returns how many it got.
  std::size_t read_at(void* to, std::size_t size, std::uint64_t offset) const {
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pread(fd_, static_cast<char*>(to) + done, size - done,
                                static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

 private:
  int fd_;
};

/// A gzip stream read from its start, record after record.
class GzipCursor {
 public:
  explicit GzipCursor(const std::filesystem::path& path)
      : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr)
      throw ConfigError(fmt::format("{}: cannot open: {}", path.string(), std::strerror(errno)));
    gzbuffer(file_, 128 * 1024);
  }
  ~GzipCursor() { gzclose_r(file_); }
  GzipCursor(const GzipCursor&) = delete;
  GzipCursor& operator=(const GzipCursor&) = delete;

  std::int64_t next() const noexcept { return next_; }
  std::uint64_t position() const noexcept { return position_; }

  /// The next frame's payload length, or false at a clean end of the stream.
  bool header(std::uint64_t& length) {
    std::array<unsigned char, kHeaderBytes> h{};
    const std::size_t got = read(h.data(), h.size());
    if (got == 0) return false;
    if (got < h.size()) truncated("its header");
    length = checked_length(h.data(), path_, next_, position_ - got);
    return true;
  }
  /// The payload and footer after header(), checked; then the next record.
  std::string payload(std::uint64_t length) {
    std::string bytes(length, '\0');
    std::array<unsigned char, kFooterBytes> footer{};
    if (read(bytes.data(), length) < length || read(footer.data(), footer.size()) < footer.size())
      truncated(fmt::format("{} bytes of data", length));
    check_payload(bytes, footer.data(), path_, next_);
    ++next_;
    return bytes;
  }
  void skip(std::uint64_t length) {
    std::array<char, 64 * 1024> scratch{};
    std::uint64_t left = length + kFooterBytes;
    while (left > 0) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(left, scratch.size()));
      if (read(scratch.data(), want) < want) truncated(fmt::format("{} bytes of data", length));
      left -= want;
    }
    ++next_;
  }
  void rewind() {
    if (gzrewind(file_) != 0) fail();
    next_ = 0;
    position_ = 0;
  }

 private:
  std::size_t read(void* to, std::size_t size) {
    const int n = gzread(file_, to, static_cast<unsigned>(size));
    if (n < 0) fail();
    position_ += static_cast<std::uint64_t>(n);
    if (static_cast<std::size_t>(n) < size) {
      int code = Z_OK;
      gzerror(file_, &code);
      if (code != Z_OK && code != Z_BUF_ERROR) fail();
    }
    return static_cast<std::size_t>(n);
  }
  [[noreturn]] void truncated(const std::string& what) {
    throw ConfigError(
        fmt::format("{}: record {} (byte {} of the decompressed stream): the file ends inside {} "
                    "(truncated?)",
                    path_.string(), next_, position_, what));
  }
  [[noreturn]] void fail() {
    int code = Z_OK;
    const char* message = gzerror(file_, &code);
    throw ConfigError(fmt::format("{}: record {}: GZIP data cannot be decompressed: {}",
                                  path_.string(), next_, message ? message : "unknown error"));
  }

  std::filesystem::path path_;
  gzFile file_;
  std::int64_t next_ = 0;
  std::uint64_t position_ = 0;
};

}  // namespace

// No descriptor is kept between reads: a set of 1,500 files must not need
// 1,500 of them open (the usual limit is 1,024).
struct TfRecordFile::Plain {
  std::uint64_t file_bytes = 0;
  std::int64_t records = 0;
  std::vector<std::uint64_t> every_64th;  // frame offsets of records 0, 64, 128, ...

  /// The payload length of the frame at `at` (record `record`), checked
  /// against the file's end.
  std::uint64_t frame(const Descriptor& fd, const std::filesystem::path& path, std::int64_t record,
                      std::uint64_t at) const {
    std::array<unsigned char, kHeaderBytes> h{};
    if (fd.read_at(h.data(), h.size(), at) < h.size())
      throw ConfigError(
          fmt::format("{}: record {} (byte {}): the file ends inside its header (truncated?)",
                      path.string(), record, at));
    const std::uint64_t length = checked_length(h.data(), path, record, at);
    if (file_bytes - at - kHeaderBytes < length + kFooterBytes)
      throw ConfigError(fmt::format(
          "{}: record {} (byte {}): {} bytes of data announced, but the file ends {} bytes "
          "later (truncated?)",
          path.string(), record, at, length, file_bytes - at - kHeaderBytes));
    return length;
  }
};

struct TfRecordFile::Gzip {
  std::int64_t records = 0;
  mutable std::mutex mutex;
  mutable std::vector<std::unique_ptr<GzipCursor>> idle;
};

bool is_gzip_tfrecord(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<unsigned char, kHeaderBytes> h{};
  in.read(reinterpret_cast<char*>(h.data()), h.size());
  const auto got = static_cast<std::size_t>(in.gcount());
  if (got < 2 || h[0] != 0x1f || h[1] != 0x8b) return false;
  return got < kHeaderBytes || mask_crc32c(crc32c(h.data(), 8)) != load_u32(h.data() + 8);
}

TfRecordFile::TfRecordFile(std::filesystem::path path) : path_(std::move(path)) {
  refuse_special_file(path_);
  gzip_ = is_gzip_tfrecord(path_);
  if (gzip_) {
    gz_ = std::make_unique<Gzip>();
    auto cursor = std::make_unique<GzipCursor>(path_);
    // TFRecords compress a few times; a file that expands a hundredfold is
    // a decompression bomb (a megabyte of empty records cost minutes).
    std::error_code error;
    const std::uint64_t limit =
        kMaxGzipExpansion * std::filesystem::file_size(path_, error) + (std::uint64_t{1} << 20);
    std::uint64_t length = 0, expanded = 0;
    while (cursor->header(length)) {
      expanded += kHeaderBytes + length + kFooterBytes;
      if (expanded > limit)
        throw ConfigError(fmt::format(
            "{}: record {}: the GZIP file expands more than {} times its size: refused as a "
            "decompression bomb",
            path_.string(), cursor->next(), kMaxGzipExpansion));
      cursor->skip(length);
    }
    gz_->records = cursor->next();
    return;  // the cursor and its descriptor go: reads open their own
  }
  plain_ = std::make_unique<Plain>();
  const Descriptor fd(path_);
  std::error_code error;
  plain_->file_bytes = std::filesystem::file_size(path_, error);
  if (error)
    throw ConfigError(fmt::format("{}: cannot read its size: {}", path_.string(), error.message()));
  std::uint64_t at = 0;
  while (at < plain_->file_bytes) {
    if (plain_->records % kIndexStride == 0) plain_->every_64th.push_back(at);
    at += kHeaderBytes + plain_->frame(fd, path_, plain_->records, at) + kFooterBytes;
    ++plain_->records;
  }
}

TfRecordFile::~TfRecordFile() = default;
TfRecordFile::TfRecordFile(TfRecordFile&&) noexcept = default;
TfRecordFile& TfRecordFile::operator=(TfRecordFile&&) noexcept = default;

std::int64_t TfRecordFile::size() const noexcept {
  return gzip_ ? gz_->records : plain_->records;
}

std::string TfRecordFile::record(std::int64_t index) const {
  if (index < 0 || index >= size())
    throw Error(ExitCode::failure,
                fmt::format("{}: record {} asked of {}", path_.string(), index, size()));
  if (!gzip_) {
    const auto from = index / kIndexStride * kIndexStride;
    std::uint64_t at = plain_->every_64th[static_cast<std::size_t>(index / kIndexStride)];
    const Descriptor fd(path_);
    for (std::int64_t r = from; r < index; ++r)
      at += kHeaderBytes + plain_->frame(fd, path_, r, at) + kFooterBytes;
    const std::uint64_t length = plain_->frame(fd, path_, index, at);
    std::string bytes(length, '\0');
    std::array<unsigned char, kFooterBytes> footer{};
    if (fd.read_at(bytes.data(), length, at + kHeaderBytes) < length ||
        fd.read_at(footer.data(), footer.size(), at + kHeaderBytes + length) < footer.size())
      throw ConfigError(
          fmt::format("{}: record {}: the file shrank while being read", path_.string(), index));
    check_payload(bytes, footer.data(), path_, index);
    return bytes;
  }
  // The idle cursor nearest before `index`; else a new one, or the oldest
  // one rewound once kMaxCursors exist.
  std::unique_ptr<GzipCursor> cursor;
  {
    const std::scoped_lock lock(gz_->mutex);
    auto& idle = gz_->idle;
    std::size_t best = idle.size();
    for (std::size_t c = 0; c < idle.size(); ++c) {
      if (idle[c]->next() <= index && (best == idle.size() || idle[c]->next() > idle[best]->next()))
        best = c;
    }
    if (best == idle.size() && idle.size() >= kMaxCursors) best = 0;
    if (best < idle.size()) {
      cursor = std::move(idle[best]);
      idle.erase(idle.begin() + static_cast<std::ptrdiff_t>(best));
    }
  }
  if (!cursor) cursor = std::make_unique<GzipCursor>(path_);
  if (cursor->next() > index) cursor->rewind();
  std::uint64_t length = 0;
  while (cursor->next() < index) {
    if (!cursor->header(length))
      throw ConfigError(fmt::format("{}: the file changed while being read", path_.string()));
    cursor->skip(length);
  }
  if (!cursor->header(length))
    throw ConfigError(fmt::format("{}: the file changed while being read", path_.string()));
  std::string bytes = cursor->payload(length);
  const std::scoped_lock lock(gz_->mutex);
  gz_->idle.push_back(std::move(cursor));
  return bytes;
}

void TfRecordFile::release_cursors() const {
  if (!gzip_) return;
  std::vector<std::unique_ptr<GzipCursor>> closing;
  {
    const std::scoped_lock lock(gz_->mutex);
    closing.swap(gz_->idle);
  }
}

}  // namespace polyhal::detail
