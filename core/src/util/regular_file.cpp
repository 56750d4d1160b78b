#include "util/regular_file.hpp"

#include <fmt/format.h>

#include "polyhal/error.hpp"

namespace polyhal::detail {

void refuse_special_file(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);
  if (ec && status.type() != fs::file_type::not_found)
    throw ConfigError(fmt::format("{}: cannot read it: {}", file.string(), ec.message()));
  switch (status.type()) {
    case fs::file_type::regular:
    case fs::file_type::not_found:
    case fs::file_type::none:
      return;
    case fs::file_type::directory:
      throw ConfigError(fmt::format("{}: a directory, not a file", file.string()));
    case fs::file_type::fifo:
      throw ConfigError(fmt::format(
          "{}: a FIFO, not a regular file (reading it could block forever)", file.string()));
    case fs::file_type::socket:
      throw ConfigError(fmt::format("{}: a socket, not a regular file", file.string()));
    default:
      throw ConfigError(fmt::format(
          "{}: a device, not a regular file (it may never end: give a file)", file.string()));
  }
}

void refuse_special_or_oversized_file(const std::filesystem::path& file, std::uintmax_t max_bytes,
                                      const std::string& kind) {
  refuse_special_file(file);
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (!ec && size > max_bytes)
    throw ConfigError(fmt::format("{}: {} bytes, more than the {} a {} may have", file.string(),
                                  size, max_bytes, kind));
}

}  // namespace polyhal::detail
