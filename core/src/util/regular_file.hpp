#pragma once
// Inputs are regular files. A FIFO blocks a reader forever, a device
// (/dev/zero) never ends, and a directory reads as garbage or as "truncated":
// each is refused with its own words before it is opened.
#include <cstdint>
#include <filesystem>
#include <string>

namespace polyhal::detail {

/// ConfigError "<file>: a directory, not a file" (or a FIFO, socket or
/// device) when `file` exists and is not a regular file (symlinks followed).
/// A missing file is left to the reader, whose message says what it is.
void refuse_special_file(const std::filesystem::path& file);

/// refuse_special_file, then ConfigError "<file>: N bytes, more than the M
/// a <kind> may have" for a file larger than `max_bytes`: what a reader
/// holds in memory grows with its input, so a small mistake (a wrong path,
/// a huge dump) must not take the machine's memory.
void refuse_special_or_oversized_file(const std::filesystem::path& file, std::uintmax_t max_bytes,
                                      const std::string& kind);

}  // namespace polyhal::detail
