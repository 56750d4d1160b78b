#pragma once
// The sink behind `log.file`: appends each line with write(2) and remembers
// the first failure (a full disk, /dev/full, an I/O error) instead of letting
// spdlog print it and carry on, so the run can end with exit 1 naming the
// file rather than exit 0 with its log silently lost.
#include <fcntl.h>
#include <spdlog/sinks/base_sink.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>

#include "polyhal/error.hpp"

namespace polyhal {

class LogFileSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit LogFileSink(std::filesystem::path file) : file_(std::move(file)) {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw ConfigError(
          fmt::format("log.file {}: cannot open it: {}", file_.string(), std::strerror(errno)));
  }
  ~LogFileSink() override {
    if (fd_ >= 0) ::close(fd_);
  }
  LogFileSink(const LogFileSink&) = delete;
  LogFileSink& operator=(const LogFileSink&) = delete;

  /// Throws RuntimeFailure (exit 1) naming the file when a write failed.
  void check() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty())
      throw RuntimeFailure(fmt::format("log.file {}: writing failed ({}): log lines were lost",
                                       file_.string(), failure_));
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& message) override {
    spdlog::memory_buf_t line;
    formatter_->format(message, line);
    const char* data = line.data();
    std::size_t left = line.size();
    while (left > 0 && failure_.empty()) {
      const ssize_t n = ::write(fd_, data, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        failure_ = n < 0 ? std::strerror(errno) : "nothing written";
        return;
      }
      data += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  void flush_() override {}

 private:
  std::filesystem::path file_;
  int fd_ = -1;
  std::string failure_;  // the first write error
};

}  // namespace polyhal
