#pragma once
// libhdf5 itself can crash (SIGSEGV, SIGFPE) or loop on malformed files, so
// polyhal lets it parse a data file from outside in a child process first
// (inside libpolyhal, not installed). docs/hardening.md says what remains.
#include <filesystem>
#include <functional>

namespace polyhal::detail {

/// Runs `parse` (libhdf5 work on `file`) in a child process. When libhdf5
/// crashes or hangs there, throws ConfigError naming the file and the
/// signal; when `parse` throws a polyhal::Error there, throws a ConfigError
/// with its message. Returns normally only if `parse` finished in the child:
/// the same bytes are then parsed by the same code in this process.
void vet_hdf5_in_child(const std::filesystem::path& file, const std::function<void()>& parse);

}  // namespace polyhal::detail
