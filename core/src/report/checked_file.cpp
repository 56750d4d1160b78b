#include "polyhal/app/checked_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "polyhal/error.hpp"

namespace polyhal {

CheckedFile::CheckedFile(std::filesystem::path path, std::string what, bool exclusive)
    : path_(std::move(path)), what_(std::move(what)) {
  const int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC);
  fd_ = ::open(path_.c_str(), flags, 0644);
  if (fd_ < 0)
    throw UsageError(fmt::format("{} {}: cannot open for writing: {}", what_, path_.string(),
                                 std::strerror(errno)));
}

CheckedFile::~CheckedFile() {
  if (fd_ >= 0) ::close(fd_);
}

void CheckedFile::append(std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd_, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      throw RuntimeFailure(fmt::format("{} {}: write failed: {}", what_, path_.string(),
                                       written < 0 ? std::strerror(errno) : "no progress"));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

void CheckedFile::sync() {
  if (::fsync(fd_) != 0 && errno != EINVAL && errno != EROFS) {
    throw RuntimeFailure(
        fmt::format("{} {}: fsync failed: {}", what_, path_.string(), std::strerror(errno)));
  }
}

}  // namespace polyhal
