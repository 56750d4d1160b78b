#include "util/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

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

}  // namespace

void write_file_atomically(const std::filesystem::path& file,
                           const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path temporary = file.string() + ".tmp";
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

void write_file_atomically(const std::filesystem::path& file, std::string_view content) {
  write_file_atomically(file, [content](std::ostream& out) {
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
  });
}

}  // namespace polyhal::detail
