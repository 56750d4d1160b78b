#pragma once
// One TFRecord file, as tf.io.TFRecordWriter writes it: records framed as
//   uint64 length | uint32 masked CRC-32C of the length | length bytes |
//   uint32 masked CRC-32C of the bytes
// (little-endian), plain or GZIP-compressed (TFRecordOptions "GZIP": one
// gzip stream over the same frames).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace polyhal::detail {

/// The longest record polyhal reads. A BERT example at seq 512 is about
/// 10 KB; a larger length is a damaged or foreign file, refused before
/// anything is allocated for it.
inline constexpr std::uint64_t kMaxTfRecordBytes = std::uint64_t{16} << 20;

class TfRecordFile {
 public:
  /// Opens `path` and walks every frame once: a plain file's headers are
  /// read and their CRCs checked (the payloads are skipped, so opening reads
  /// 12 bytes a record), a GZIP file is decompressed as a stream. Throws
  /// ConfigError naming the file, the record number and the byte offset of a
  /// truncated frame, a bad length CRC or an oversized record.
  explicit TfRecordFile(std::filesystem::path path);
  ~TfRecordFile();
  TfRecordFile(TfRecordFile&&) noexcept;
  TfRecordFile& operator=(TfRecordFile&&) noexcept;

  const std::filesystem::path& path() const noexcept { return path_; }
  bool gzip() const noexcept { return gzip_; }
  std::int64_t size() const noexcept;  ///< records

  /// Record `index`'s bytes after checking its data CRC (ConfigError naming
  /// file and record). Safe to call from several threads. A plain file is
  /// read at the record's offset; a GZIP file through a few decompressing
  /// cursors, so reading in order (each thread in its own order) costs one
  /// pass, and going back restarts a cursor from the file's start.
  std::string record(std::int64_t index) const;
  /// Closes a GZIP file's idle cursors (and their descriptors); the next
  /// read opens one again. Nothing for a plain file, which keeps none.
  void release_cursors() const;

 private:
  struct Plain;
  struct Gzip;
  std::filesystem::path path_;
  bool gzip_ = false;
  std::unique_ptr<Plain> plain_;
  std::unique_ptr<Gzip> gz_;
};

/// Whether the file starts with gzip's magic bytes and not with a valid
/// plain frame header.
bool is_gzip_tfrecord(const std::filesystem::path& path);

}  // namespace polyhal::detail
