#include "metrics_writer.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal::launcher {

MetricsWriter::MetricsWriter(const std::filesystem::path& path) : path_(path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw UsageError(fmt::format("--metrics-out {}: cannot open for writing: {}", path.string(),
                                 std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::append(std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd_, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      throw RuntimeFailure(fmt::format("--metrics-out {}: write failed: {}", path_.string(),
                                       written < 0 ? std::strerror(errno) : "no progress"));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (fd_ < 0) return;
  append(record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

void MetricsWriter::write_summary(nlohmann::json summary) {
  summary["event"] = "summary";
  for (const char* key : {"backend", "device", "model", "precision", "seq_len", "global_batch",
                          "sequences_per_second"}) {
    if (!summary.contains(key)) summary[key] = nullptr;
  }
  write(summary);
  // A pipe or a terminal cannot be synced (EINVAL); a file must be.
  if (fd_ >= 0 && ::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
    throw RuntimeFailure(
        fmt::format("--metrics-out {}: fsync failed: {}", path_.string(), std::strerror(errno)));
  }
}

}  // namespace polyhal::launcher
