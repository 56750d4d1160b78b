#pragma once
// An output file the launcher writes as a run goes (metrics, CSV, TensorBoard
// events): every write checked, synced on request, so a full disk or an I/O
// error stops the run (exit 1, the file and the system's reason) instead of
// leaving a silently truncated file.
#include <filesystem>
#include <string>
#include <string_view>
#include "polyhal/app/not_for_plugins.hpp"

namespace polyhal {

class CheckedFile {
 public:
  /// Opens `path` for writing (truncated, or created exclusively when
  /// `exclusive`). `what` names it in messages ("--metrics-out"). Throws
  /// UsageError when it cannot be opened.
  CheckedFile(std::filesystem::path path, std::string what, bool exclusive = false);
  ~CheckedFile();
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;

  void append(std::string_view text);
  /// fsync; a pipe or a terminal (which cannot be synced) is fine.
  void sync();
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  std::string what_;
  int fd_ = -1;
};

}  // namespace polyhal
