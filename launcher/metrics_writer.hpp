#pragma once
// JSON-lines metrics for --metrics-out: one object per line, the last one a
// summary with at least backend, device, model, precision, seq_len,
// global_batch and sequences_per_second (null where a task has no such term).
// Lines are written as they come (a run can be watched with tail -f); every
// write is checked and the summary is fsynced, so a full disk or an I/O
// error stops the run (exit 1, the path and the system's reason) instead of
// leaving a silently truncated file.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string_view>

namespace polyhal::launcher {

class MetricsWriter {
 public:
  /// Opens `path` for writing; an empty path makes every call a no-op.
  explicit MetricsWriter(const std::filesystem::path& path);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);
  /// The last record; flushed to the disk before it returns.
  void write_summary(nlohmann::json summary);

 private:
  void append(std::string_view text);
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace polyhal::launcher
