#include "metrics_writer.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal::launcher {

MetricsWriter::MetricsWriter(const std::filesystem::path& path) {
  if (path.empty()) return;
  out_.open(path, std::ios::out | std::ios::trunc);
  if (!out_)
    throw UsageError(fmt::format("--metrics-out {}: cannot open for writing", path.string()));
  enabled_ = true;
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled_) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

void MetricsWriter::write_summary(nlohmann::json summary) {
  summary["event"] = "summary";
  for (const char* key : {"backend", "device", "model", "precision", "seq_len", "global_batch",
                          "sequences_per_second"}) {
    if (!summary.contains(key)) summary[key] = nullptr;
  }
  write(summary);
}

}  // namespace polyhal::launcher
