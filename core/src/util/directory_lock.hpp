#pragma once
// An exclusive lock on a directory a run writes into (checkpoint.dir), held
// for the life of the object: two runs on one directory would replace each
// other's checkpoints. flock(2) on DIR/.polyhal.lock, which also records
// the holder (pid, host, time) for the message the second run gets; the
// kernel drops the lock when the holder exits, however it ends.
#include <filesystem>
#include <string>

namespace polyhal::detail {

class DirectoryLock {
 public:
  /// Creates `dir` when missing and locks it; ConfigError naming the holder
  /// when another process holds it, `what` naming the directory's key.
  DirectoryLock(const std::filesystem::path& dir, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace polyhal::detail
