#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "polyhal/error.hpp"

namespace polyhal::detail {
namespace {

/// fsync of a file or directory; the error text, or empty on success.
std::string sync_path(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  const int result = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL): nothing to lose there.
  if (result != 0 && !(error == EINVAL && (flags & O_DIRECTORY))) return std::strerror(error);
  return {};
}

/// Refuses a special file where a writer needs a regular one it can replace.
void require_regular_output(const std::filesystem::path& file) {
  if (is_special_output(file))
    throw RuntimeFailure(fmt::format(
        "{}: is a device, FIFO or socket; this output is written whole as a regular file and "
        "put in place at the end: name a file",
        file.string()));
}

}  // namespace

bool is_special_output(const std::filesystem::path& file) {
  std::error_code error;
  const auto status = std::filesystem::status(file, error);
  if (error || !std::filesystem::exists(status)) return false;
  if (std::filesystem::is_directory(status))
    throw RuntimeFailure(fmt::format("{}: is a directory; name the file to write", file.string()));
  return !std::filesystem::is_regular_file(status);
}

std::filesystem::path create_unique_temporary(const std::filesystem::path& file) {
  require_regular_output(file);
  std::string pattern = file.string() + ".tmp.XXXXXX";
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) {
    throw RuntimeFailure(
        fmt::format("{}: cannot create a file beside it: {}", file.string(), std::strerror(errno)));
  }
  ::fchmod(fd, 0644);  // mkstemp makes 0600; an output file is readable as any other
  ::close(fd);
  return pattern;
}

void write_file_atomically(const std::filesystem::path& file,
                           const std::function<void(std::ostream&)>& write) {
  if (is_special_output(file)) {
    std::ofstream out(file, std::ios::binary);
    if (!out)
      throw RuntimeFailure(
          fmt::format("{}: cannot open it: {}", file.string(), std::strerror(errno)));
    write(out);
    out.flush();
    if (!out) throw RuntimeFailure(fmt::format("{}: write failed", file.string()));
    return;
  }
  const std::filesystem::path temporary = create_unique_temporary(file);
  const auto fail = [&](const std::string& what) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw RuntimeFailure(fmt::format("{}: {}", file.string(), what));
  };
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail(fmt::format("cannot create {}: {}", temporary.string(), std::strerror(errno)));
    write(out);
    out.flush();
    if (!out) fail("write failed (disk full?)");
    out.close();
    if (!out) fail("write failed on close (disk full?)");
  }
  publish_atomically(temporary, file);
}

void publish_atomically(const std::filesystem::path& temporary, const std::filesystem::path& file) {
  const auto fail = [&](const std::string& what) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw RuntimeFailure(fmt::format("{}: {}", file.string(), what));
  };
  try {
    require_regular_output(file);
  } catch (const RuntimeFailure&) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  if (auto error = sync_path(temporary, O_RDONLY); !error.empty())
    fail(fmt::format("fsync failed: {}", error));
  std::error_code renamed;
  std::filesystem::rename(temporary, file, renamed);
  if (renamed)
    fail(fmt::format("cannot rename {} into place: {}", temporary.string(), renamed.message()));
  const auto directory = file.has_parent_path() ? file.parent_path() : std::filesystem::path(".");
  if (auto error = sync_path(directory, O_RDONLY | O_DIRECTORY); !error.empty())
    throw RuntimeFailure(
        fmt::format("{}: fsync of the directory failed: {}", file.string(), error));
}

AtomicOutput::AtomicOutput(std::filesystem::path file) : file_(std::move(file)) {
  if (is_special_output(file_)) {
    fd_ = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0)
      throw RuntimeFailure(
          fmt::format("{}: cannot open it: {}", file_.string(), std::strerror(errno)));
    return;
  }
  std::string pattern = file_.string() + ".tmp.XXXXXX";
  fd_ = ::mkstemp(pattern.data());
  if (fd_ < 0) {
    throw RuntimeFailure(fmt::format("{}: cannot create a file beside it: {}", file_.string(),
                                     std::strerror(errno)));
  }
  temporary_ = pattern;
  ::fchmod(fd_, 0644);  // mkstemp makes 0600; an output file is readable as any other
}

AtomicOutput::~AtomicOutput() {
  if (fd_ < 0) return;
  ::close(fd_);
  if (temporary_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove(temporary_, ignored);
}

void AtomicOutput::write(std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(fd_, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      throw RuntimeFailure(fmt::format("{}: write failed: {}", file_.string(),
                                       written < 0 ? std::strerror(errno) : "no progress"));
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

void AtomicOutput::commit() {
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) {
    const std::string error = std::strerror(errno);
    std::error_code ignored;
    if (!temporary_.empty()) std::filesystem::remove(temporary_, ignored);
    throw RuntimeFailure(fmt::format("{}: close failed: {}", file_.string(), error));
  }
  if (!temporary_.empty()) publish_atomically(temporary_, file_);
}

void write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  write_file_atomically(file, [content](std::ostream& out) {
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  });
}

}  // namespace polyhal::detail
