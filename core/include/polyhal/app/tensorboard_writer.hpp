#pragma once
// TensorBoard event files (--tensorboard DIR): the scalars of a run (loss,
// learning rate, loss scale, gradient norm, throughput, evaluation metrics)
// in the format TensorBoard reads: TFRecord framing (length, masked CRC-32C
// of the length, an Event protocol buffer, masked CRC-32C of the data) in
// DIR/events.out.tfevents.<seconds>.<host>. Written with checked writes and
// synced at the end, as --metrics-out.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include "polyhal/app/not_for_plugins.hpp"

#include "polyhal/app/checked_file.hpp"

namespace polyhal {

/// CRC-32C (Castagnoli), as TFRecord frames use it.
std::uint32_t crc32c(std::string_view data);
/// The CRC TFRecord stores: rotated and offset, so a CRC of CRCs differs.
std::uint32_t masked_crc32c(std::string_view data);

class TensorBoardWriter {
 public:
  /// Creates DIR if needed and the event file in it, with the file-version
  /// event first. Throws UsageError naming DIR when it cannot.
  explicit TensorBoardWriter(const std::filesystem::path& dir);

  /// One scalar `tag` at `step`, stamped with the wall clock now.
  void scalar(const std::string& tag, std::int64_t step, double value);
  /// Syncs the file; a failure throws RuntimeFailure naming it.
  void sync();
  const std::filesystem::path& file() const noexcept { return file_->path(); }

 private:
  void record(const std::string& event);
  std::unique_ptr<CheckedFile> file_;
};

}  // namespace polyhal
