#pragma once
// JSON-lines metrics for --metrics-out: one object per line, the last one a
// summary with at least backend, device, model, precision, seq_len,
// global_batch and sequences_per_second (null where a task has no such term).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace polyhal::launcher {

class MetricsWriter {
 public:
  /// Opens `path` for writing; an empty path makes every call a no-op.
  explicit MetricsWriter(const std::filesystem::path& path);
  void write(const nlohmann::json& record);
  void write_summary(nlohmann::json summary);

 private:
  std::ofstream out_;
  bool enabled_ = false;
};

}  // namespace polyhal::launcher
