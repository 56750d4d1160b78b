#pragma once
// Files written so that a crash, a kill or a full disk never leaves a
// half-written one in place (inside libpolyhal, not installed).
#include <filesystem>
#include <functional>
#include <ostream>
#include <string_view>

namespace polyhal::detail {

// An output that already exists as a device, FIFO or socket (/dev/null,
// /dev/stdout, a pipe) is written in place by write_file_atomically and
// AtomicOutput: it is never replaced by a regular file. One that is a
// directory is refused. create_unique_temporary and publish_atomically,
// whose writers need a regular file, refuse both.

/// Whether `file` (symbolic links followed) is a device, FIFO or socket.
/// Throws RuntimeFailure naming it when it is a directory.
bool is_special_output(const std::filesystem::path& file);

/// Creates an empty file with a unique name beside `file` ("<file>.tmp.XXXXXX",
/// mkstemp: created exclusively, never through a link someone planted) for
/// a writer that opens files by name (an ofstream, libhdf5). Throws
/// RuntimeFailure naming `file`.
std::filesystem::path create_unique_temporary(const std::filesystem::path& file);

/// Writes `file` through `write` into a unique temporary file beside it
/// (create_unique_temporary), flushes and fsyncs it,
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

/// A file written piece by piece (an output too large to hold in memory)
/// under a unique temporary name in its own directory (mkstemp: created
/// exclusively, never through a link someone planted), every write checked,
/// put in place by commit() as publish_atomically does. Destroyed without
/// commit() (an error), it removes the temporary file. Failures throw
/// RuntimeFailure naming `file` and the system's reason.
class AtomicOutput {
 public:
  explicit AtomicOutput(std::filesystem::path file);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  void write(std::string_view text);
  void commit();

 private:
  std::filesystem::path file_, temporary_;
  int fd_ = -1;
};

}  // namespace polyhal::detail
