#pragma once
// Files written so that a crash, a kill or a full disk never leaves a
// half-written one in place (inside libpolyhal, not installed).
#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace polyhal::detail {

/// Writes `file` through `write` into "<file>.tmp", flushes and fsyncs it,
/// renames it over `file` and fsyncs the directory: afterwards `file` is
/// either the old one or the complete new one. A failed write (disk full,
/// read-only directory) removes the temporary file and throws RuntimeFailure
/// naming the file.
void write_file_atomically(const std::filesystem::path& file,
                           const std::function<void(std::ostream&)>& write);
/// Puts `temporary`, written and closed by another writer (a library that
/// writes files itself, HDF5), in place as `file`, as above: fsync, rename,
/// fsync the directory; on failure removes `temporary` and throws.
void publish_atomically(const std::filesystem::path& temporary, const std::filesystem::path& file);
/// The same for text already in memory.
void write_file_atomically(const std::filesystem::path& file, std::string_view content);

}  // namespace polyhal::detail
