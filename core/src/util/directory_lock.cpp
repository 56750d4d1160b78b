#include "util/directory_lock.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "polyhal/error.hpp"

namespace polyhal::detail {
namespace {

std::string read_holder(int fd) {
  char text[256] = {};
  const ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
  std::string holder(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  return holder.empty() ? std::string("a process that wrote no details") : holder;
}

}  // namespace

DirectoryLock::DirectoryLock(const std::filesystem::path& dir, const std::string& what) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw ConfigError(fmt::format("{} {}: cannot create it: {}", what, dir.string(), ec.message()));
  const auto file = dir / ".polyhal.lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    throw ConfigError(fmt::format("{} {}: cannot open {}: {}", what, dir.string(), file.string(),
                                  std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK)
      throw ConfigError(fmt::format(
          "{} {} is in use by another run ({}): two runs on one directory would replace each "
          "other's files; give this run its own {}",
          what, dir.string(), holder, what));
    throw ConfigError(fmt::format("{} {}: cannot lock {}: {}", what, dir.string(), file.string(),
                                  std::strerror(error)));
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char when[64] = {};
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  const std::string holder = fmt::format("pid {} on host {}, since {}\n", ::getpid(), host, when);
  // Best effort: the lock is what counts; the text only helps the message.
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t written = ::pwrite(fd_, holder.data(), holder.size(), 0);
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace polyhal::detail
